//go:build linux

package server

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// gVisorMemoryUsage is where gVisor's kernel shows what the sandbox's
// processes use (their memory, page cache and tmpfs), without the
// Sentry's own.
const gVisorMemoryUsage = "/sys/fs/cgroup/memory/memory.usage_in_bytes"

// How often watchMemory reads the usage: before the processes could
// reach the limit from their last usage at maxAllocRate, within
// [minMemoryPoll, maxMemoryPoll]. Past the limit a process that allocates
// faster than the container's headroom per minMemoryPoll still meets the
// host's limit (engine/docker's gVisorMemoryHeadroom). Read every 20 ms
// always, the usage took 8% of a core per idle sandbox under gVisor.
const (
	minMemoryPoll = 20 * time.Millisecond
	maxMemoryPoll = 500 * time.Millisecond
	// maxAllocRate is the fastest the processes are taken to grow, in
	// bytes a second: eight times what a process touching fresh memory
	// made here (0.23 GB/s under gVisor, 0.30 under runc).
	maxAllocRate = 2 << 30
)

// nextMemoryPoll is how long after reading usage the next read comes.
func nextMemoryPoll(usage, limit uint64) time.Duration {
	if usage >= limit {
		return minMemoryPoll
	}
	wait := time.Duration(float64(limit-usage) / maxAllocRate * float64(time.Second))
	return min(max(wait, minMemoryPoll), maxMemoryPoll)
}

// watchMemory is the sandbox's out-of-memory killer where the kernel the
// processes see has none (gVisor): while the processes' usage is at or
// above limit bytes, it kills the one with the most resident memory
// (never envd, the channel agent or the init) and logs why. Without it
// the host's kernel kills one of gVisor's own processes at the
// container's limit, which ends the whole sandbox (a host process of an
// address space killed in the middle of a system call takes the Sentry
// with it). ctx ends it.
func watchMemory(ctx context.Context, limit uint64, usageFile string, logger *slog.Logger) {
	self, _ := os.Executable()
	var lastVictim int
	timer := time.NewTimer(minMemoryPoll)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		usage, victim := checkMemory(limit, usageFile, self, lastVictim, logger)
		if victim != 0 {
			lastVictim = victim
		}
		timer.Reset(nextMemoryPoll(usage, limit))
	}
}

// checkMemory reads the processes' usage and, at or above limit, kills the
// largest process unless lastVictim, killed before, still lives (its
// memory is not free yet). It returns the usage read (limit while a
// victim dies or when the usage cannot be read, so that the next read
// comes soon) and the process killed, 0 for none.
func checkMemory(limit uint64, usageFile, self string, lastVictim int, logger *slog.Logger) (usage uint64, victim int) {
	if lastVictim != 0 && alive(lastVictim) {
		return limit, 0
	}
	usage, err := readUint(usageFile)
	if err != nil {
		return limit, 0
	}
	if usage < limit {
		return usage, 0
	}
	pid, name, rss := largestProcess(self)
	if pid == 0 {
		return usage, 0
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return usage, 0
	}
	if pid != lastVictim { // one line per process, however long it takes to die
		logger.Warn(fmt.Sprintf("out of memory: killed process %d (%s) with %d MiB resident: the sandbox's processes used %d MiB of its %d MiB",
			pid, name, rss>>20, usage>>20, limit>>20))
	}
	return usage, pid
}

// largestProcess is the process with the most resident memory, its name
// and that memory in bytes, among those that are neither the init (PID
// 1) nor envd (the binary self, serving or as the channel agent); 0 when
// there is none.
func largestProcess(self string) (pid int, name string, rss uint64) {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	page := uint64(os.Getpagesize()) //nolint:gosec // a page size is positive
	for _, dir := range dirs {
		p, err := strconv.Atoi(filepath.Base(dir))
		if err != nil || p == 1 || p == os.Getpid() {
			continue
		}
		if exe, err := os.Readlink(dir + "/exe"); err == nil && exe == self {
			continue
		}
		statm, err := os.ReadFile(dir + "/statm")
		if err != nil {
			continue
		}
		fields := strings.Fields(string(statm))
		if len(fields) < 2 {
			continue
		}
		pages, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil || pages*page <= rss {
			continue
		}
		comm, _ := os.ReadFile(dir + "/comm")
		pid, name, rss = p, string(bytes.TrimSpace(comm)), pages*page
	}
	return pid, name, rss
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
}
