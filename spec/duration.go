package spec

import (
	"encoding/json"
	"fmt"
	"time"
)

// MarshalJSON writes the duration as a Go duration string ("100ms"), the form
// manifests use, so status and `tether get -o yaml` show what people write.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.Duration.String())
}

// UnmarshalJSON reads a Go duration string. A JSON number is refused rather
// than guessed at (nanoseconds? seconds?).
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"30s\": %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: %s", s, durationReason(err, s))
	}
	d.Duration = v
	return nil
}

// durationReason trims time.ParseDuration's error, which repeats the input
// after "time: ", down to the reason.
func durationReason(err error, s string) string {
	msg := err.Error()
	msg = trimPrefix(msg, "time: ")
	if q := fmt.Sprintf(" %q", s); len(msg) > len(q) && msg[len(msg)-len(q):] == q {
		msg = msg[:len(msg)-len(q)]
	}
	return msg
}

func trimPrefix(s, prefix string) string {
	if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):]
	}
	return s
}
