package spec

import (
	"fmt"
	"strconv"
	"strings"
)

// MinContainerMemory is the smallest spec.container.memory: Docker refuses
// less than 6 MiB.
const MinContainerMemory = 6 << 20

// ParseMemory reads a memory size (spec.container.memory,
// spec.stdio.sandbox.limits.memory): bytes, or a number with Ki, Mi or Gi.
func ParseMemory(s string) (uint64, error) {
	num, shift := s, 0
	for _, u := range []struct {
		suffix string
		shift  int
	}{{"Ki", 10}, {"Mi", 20}, {"Gi", 30}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			num, shift = v, u.shift
			break
		}
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || n == 0 || n > (1<<63)>>shift {
		return 0, fmt.Errorf("%s is not a size: a positive number of bytes, or with Ki, Mi or Gi (2Gi)", truncateQuote(s))
	}
	return n << shift, nil
}

// FormatMemory writes n bytes with the largest unit (Gi, Mi, Ki) that
// divides it, the way spec.container.memory is hashed.
func FormatMemory(n uint64) string {
	for _, u := range []struct {
		suffix string
		shift  int
	}{{"Gi", 30}, {"Mi", 20}, {"Ki", 10}} {
		if n != 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatUint(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatUint(n, 10)
}
