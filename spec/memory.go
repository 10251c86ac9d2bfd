package spec

import (
	"errors"
	"strconv"
	"strings"
)

// Memory limits of a container (spec.container.memory).
const (
	// MinContainerMemory is the smallest limit: Docker refuses less than 6 MiB.
	MinContainerMemory = 6 << 20
	// maxContainerMemory keeps the bytes in an int64 with room to spare.
	maxContainerMemory = 1 << 50
)

var memoryUnits = []struct {
	suffix string
	shift  uint
}{{"Gi", 30}, {"Mi", 20}, {"Ki", 10}}

// ParseMemory reads a memory limit: a number of bytes, optionally with the
// suffix Ki, Mi or Gi (powers of 1024).
func ParseMemory(s string) (int64, error) {
	num, shift := s, uint(0)
	for _, u := range memoryUnits {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			num, shift = rest, u.shift
			break
		}
	}
	if num == "" || strings.TrimLeft(num, "0123456789") != "" {
		return 0, errors.New("want a number of bytes, optionally with Ki, Mi or Gi (512Mi)")
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > maxContainerMemory>>shift {
		return 0, errors.New("too large")
	}
	return n << shift, nil
}

// FormatMemory writes n bytes with the largest unit that divides it.
func FormatMemory(n int64) string {
	for _, u := range memoryUnits {
		if n != 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
