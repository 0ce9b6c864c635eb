//go:build linux

package server

import (
	"fmt"
	"os/exec"
	"syscall"
)

// wrapperArgs runs cmd with args through /bin/sh as envd 0.6.13 does
// (design/envd.md, Processes): the shell raises the process's OOM score
// above envd's, looks cmd up in the PATH of the process's environment and
// execs it under ionice and nice where the daemon's PATH has them. A
// command that cannot start is therefore a process that exits 127 or 126
// with the shell's (or nice's) message on stderr, and the shell exports PWD.
func wrapperArgs(cmd string, args []string) []string {
	script := fmt.Sprintf(`echo %d > /proc/$$/oom_score_adj && exec %s"${@}"`, oomScoreAdj, priorityPrefix())
	return append([]string{"/bin/sh", "-c", script, "--", cmd}, args...)
}

// The OOM score and I/O priority envd gives every process.
const (
	oomScoreAdj = 100
	ioClass     = 2 // best effort
	ioPriority  = 4
)

// priorityPrefix is the ionice and nice part of the wrapper, with the
// helpers the image has: a missing one is left out, not a failed start.
// So is ionice where the kernel refuses I/O priorities (some gVisor
// releases answer EPERM), which would fail every process. nice resets
// the daemon's own niceness to 0.
func priorityPrefix() string {
	prefix := ""
	if path, err := exec.LookPath("ionice"); err == nil && canSetIOPriority() {
		prefix += fmt.Sprintf("%s -c %d -n %d ", path, ioClass, ioPriority)
	}
	if path, err := exec.LookPath("nice"); err == nil {
		prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
		niceness := 0
		if err == nil {
			niceness = 20 - prio // the syscall answers 20 - nice
		}
		prefix += fmt.Sprintf("%s -n %d ", path, -niceness)
	}
	return prefix
}

// ioprioWhoProcess is IOPRIO_WHO_PROCESS of ioprio_set(2).
const ioprioWhoProcess = 1

// canSetIOPriority tells whether this process may set I/O priorities: it
// sets its own to what it is.
func canSetIOPriority() bool {
	prio, _, errno := syscall.Syscall(syscall.SYS_IOPRIO_GET, ioprioWhoProcess, 0, 0)
	if errno != 0 {
		return false
	}
	_, _, errno = syscall.Syscall(syscall.SYS_IOPRIO_SET, ioprioWhoProcess, 0, prio)
	return errno == 0
}
