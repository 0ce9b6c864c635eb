//go:build linux

package server

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	pb "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process"
)

// startSpec is everything needed to start a process.
type startSpec struct {
	user    *osUser
	cmd     string
	args    []string
	env     []string
	cwd     string
	stdin   bool
	pty     *pb.PTY
	tag     *string
	config  *pb.ProcessConfig
	timeout time.Time // zero: no lifetime limit
}

// launch starts p's command on a PTY or on pipes and returns the output
// readers: the PTY master, or stdout and stderr.
func launch(p *process, spec startSpec) ([]*os.File, error) {
	cmd := p.cmd
	if spec.pty != nil {
		master, err := startPTY(cmd, spec.pty, spec.user.credential())
		if err != nil {
			size := spec.pty.GetSize()
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("error starting pty with command '%s' in dir '%s' with '%d' cols and '%d' rows: %w",
				userCommand(spec.cmd, spec.args), spec.cwd, size.GetCols(), size.GetRows(), err))
		}
		p.tty = master
		return []*os.File{master}, nil
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(outR, outW)
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	if spec.stdin {
		if p.stdin, err = cmd.StdinPipe(); err != nil {
			closeAll(outR, outW, errR, errW)
			return nil, connect.NewError(connect.CodeInternal, err)
		}
	}
	// Own process group so that signals reach the whole tree (sh -c 'sleep 600').
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: spec.user.credential()}
	err = cmd.Start()
	closeAll(outW, errW)
	if err != nil {
		closeAll(outR, errR)
		return nil, startError(spec, err)
	}
	return []*os.File{outR, errR}, nil
}

// startError is envd's answer when even the wrapper cannot start (no
// /bin/sh, a cwd that is no directory): every other failure to run the
// command is the shell's exit.
func startError(spec startSpec, err error) error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("error starting process '%s': %w", userCommand(spec.cmd, spec.args), err))
}

// userCommand is how envd names a command in its messages.
func userCommand(cmd string, args []string) string {
	return strings.Join(append([]string{cmd}, args...), " ")
}

// startPTY starts cmd on a new PTY of the requested size and returns the
// master. The master is re-opened non-blocking so that reads honour
// deadlines and resizes do not flip it back to blocking mode.
func startPTY(cmd *exec.Cmd, size *pb.PTY, cred *syscall.Credential) (*os.File, error) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, err
	}
	defer func() { _ = tty.Close() }()
	fd, err := unix.Dup(int(ptmx.Fd()))
	_ = ptmx.Close()
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	master := os.NewFile(uintptr(fd), "/dev/ptmx")
	if err := setWinsize(tty, size.GetSize()); err != nil {
		_ = master.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Credential: cred}
	if err := cmd.Start(); err != nil {
		_ = master.Close()
		return nil, err
	}
	return master, nil
}

func setWinsize(f *os.File, size *pb.PTY_Size) error {
	if size == nil {
		return nil
	}
	conn, err := f.SyscallConn()
	if err != nil {
		return err
	}
	ws := &unix.Winsize{Row: uint16(size.GetRows()), Col: uint16(size.GetCols())} //nolint:gosec // the kernel's window size is 16-bit: larger sizes are clipped, as envd does
	var ioctlErr error
	if err := conn.Control(func(fd uintptr) { ioctlErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, ws) }); err != nil {
		return err
	}
	return ioctlErr
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}
