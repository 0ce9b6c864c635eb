package envd

import (
	"strconv"
	"strings"
	"time"
)

// The deadline file holds a sandbox's end, which the local server's engine
// writes into the container and envd (--deadline-file) watches, so that
// the container ends on time even while the server is down: the end as
// Unix milliseconds in decimal, then a newline.

// FormatDeadline is the content of a deadline file holding end.
func FormatDeadline(end time.Time) []byte {
	return []byte(strconv.FormatInt(end.UnixMilli(), 10) + "\n")
}

// ParseDeadline reads the content of a deadline file; ok is false when it
// holds no end.
func ParseDeadline(raw []byte) (end time.Time, ok bool) {
	ms, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}
