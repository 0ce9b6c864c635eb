//go:build linux

package server

import (
	"bytes"
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// becomeSubreaper makes orphaned descendants re-parent to this process, so
// that reapOrphans sees them even when envd is not PID 1.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// reapLoop reaps orphans on every SIGCHLD until ctx ends.
func (t *processTable) reapLoop(ctx context.Context) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	defer signal.Stop(sigs)
	for {
		t.reapOrphans()
		select {
		case <-ctx.Done():
			return
		case <-sigs:
		}
	}
}

// reapOrphans waits for zombie children the daemon did not start itself:
// descendants re-parented to it because it is a container's PID 1 (or a
// child subreaper). Nobody else would, and zombies would pile up in a
// long-lived sandbox. Children the daemon started are left to their
// exec.Cmd.Wait.
func (t *processTable) reapOrphans() {
	self := os.Getpid()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if ppid, state, ok := procState(pid); !ok || ppid != self || state != 'Z' {
			continue
		}
		t.spawnMu.Lock()
		if !t.owned[pid] {
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		}
		t.spawnMu.Unlock()
	}
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	_, state, ok := procState(pid)
	return ok && state != 'Z'
}

// procState reads a process's parent pid and state letter from /proc.
func procState(pid int) (ppid int, state byte, ok bool) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, false
	}
	// "pid (comm) S ppid ...": comm may contain spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, false
	}
	fields := bytes.Fields(stat[i+1:])
	if len(fields) < 2 || len(fields[0]) != 1 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(string(fields[1]))
	if err != nil {
		return 0, 0, false
	}
	return ppid, fields[0][0], true
}
