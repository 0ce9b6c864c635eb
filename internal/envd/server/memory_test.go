//go:build linux

package server

import (
	"testing"
	"time"
)

// The usage is read again before the processes could reach the limit at
// maxAllocRate, every minMemoryPoll at or past it, and at most
// maxMemoryPoll apart.
func TestNextMemoryPoll(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		usage, limit uint64
		want         time.Duration
	}{
		{usage: 40 * mib, limit: 2048 * mib, want: maxMemoryPoll},
		{usage: 40 * mib, limit: 512 * mib, want: 230468750 * time.Nanosecond},
		{usage: 500 * mib, limit: 512 * mib, want: minMemoryPoll},
		{usage: 512 * mib, limit: 512 * mib, want: minMemoryPoll},
		{usage: 900 * mib, limit: 512 * mib, want: minMemoryPoll},
	} {
		if got := nextMemoryPoll(c.usage, c.limit); got != c.want {
			t.Errorf("nextMemoryPoll(%d MiB, %d MiB) = %v, want %v", c.usage/mib, c.limit/mib, got, c.want)
		}
	}
}
