//go:build linux

package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	pb "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process"
)

// Output chunk limits of envd 0.6.13.
const (
	pipeChunk = 32 << 10
	ptyChunk  = 16 << 10
	// killDrain is how long output readers keep reading after a SIGTERM or
	// SIGKILL once the process exited: what is already in the pipe is still
	// delivered, a background child that keeps writing cannot hold the end.
	killDrain = 250 * time.Millisecond
	// subscriberBuffer is the number of events queued per attached stream
	// before the output readers wait for it (back-pressure, bounded memory).
	subscriberBuffer = 16
)

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// process is one started command. Its output goes to the streams attached at
// the moment it is read; with none attached it is discarded.
type process struct {
	pid    uint32
	tag    *string
	config *pb.ProcessConfig
	cmd    *exec.Cmd

	stdin io.WriteCloser // nil when stdin is /dev/null or the process has a PTY
	tty   *os.File       // PTY master, nil without a PTY

	// outputStopped is closed by a SIGTERM or SIGKILL: the end then no
	// longer waits for every holder of stdout and stderr to close them.
	outputStopped chan struct{}
	stopOutput    func()

	// outBytes counts the output read: stdout, stderr, PTY (for the end's
	// log line).
	outBytes [3]atomic.Int64

	mu   sync.Mutex
	subs map[*subscriber]struct{}
	end  *pb.ProcessEvent_EndEvent // set once the process ended and its output drained
	done chan struct{}             // closed together with setting end
}

// subscriber is one attached stream (Start or Connect).
type subscriber struct {
	events chan *pb.ProcessEvent
	gone   chan struct{} // closed when the stream detaches
}

// processTable holds running processes and, for the retention window,
// finished ones so that Connect can replay their end.
type processTable struct {
	retention time.Duration
	log       *slog.Logger

	mu    sync.Mutex
	procs map[uint32]*process

	// spawnMu orders starting and reaping our own children against reaping
	// orphans (see reapOrphans); owned holds the pids Wait has yet to reap.
	spawnMu sync.Mutex
	owned   map[int]bool
}

func newProcessTable(retention time.Duration, log *slog.Logger) *processTable {
	return &processTable{retention: retention, log: log, procs: map[uint32]*process{}, owned: map[int]bool{}}
}

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

// start starts a process with one stream already attached, so that the
// starting stream sees all of its output.
func (t *processTable) start(spec startSpec) (*process, *subscriber, error) {
	cmd := &exec.Cmd{Path: "/bin/sh", Args: wrapperArgs(spec.cmd, spec.args), Env: spec.env, Dir: spec.cwd}
	stopped := make(chan struct{})
	p := &process{
		tag: spec.tag, config: spec.config, cmd: cmd,
		outputStopped: stopped, stopOutput: sync.OnceFunc(func() { close(stopped) }),
		subs: map[*subscriber]struct{}{}, done: make(chan struct{}),
	}
	sub := p.subscribe()

	t.spawnMu.Lock()
	readers, err := launch(p, spec)
	if err == nil {
		t.owned[cmd.Process.Pid] = true
	}
	t.spawnMu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	p.pid = uint32(cmd.Process.Pid) //nolint:gosec // Linux PIDs are positive and below 2^22
	var requestTimeout time.Duration
	if !spec.timeout.IsZero() {
		requestTimeout = time.Until(spec.timeout)
	}
	// E2B envd's line, fields and all (handler.go Start).
	t.log.Info(fmt.Sprintf("Process with pid %d started", p.pid),
		"event_type", "process_start", "pid", p.pid, "command", userCommand(spec.cmd, spec.args),
		"request_timeout_ms", requestTimeout.Milliseconds())

	t.mu.Lock()
	t.procs[p.pid] = p
	t.mu.Unlock()

	var wg sync.WaitGroup
	for i, r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.readOutput(r, i)
		}()
	}
	go t.wait(p, readers, &wg, spec.timeout)
	return p, sub, nil
}

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
// nice resets the daemon's own niceness to 0.
func priorityPrefix() string {
	prefix := ""
	if path, err := exec.LookPath("ionice"); err == nil {
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

// launch starts p's command on a PTY or on pipes and returns the output
// readers: the PTY master, or stdout and stderr.
func launch(p *process, spec startSpec) ([]*os.File, error) {
	cmd := p.cmd
	if spec.pty != nil {
		master, err := startPTY(cmd, spec.pty, spec.user.credential())
		if err != nil {
			return nil, startError(spec, err)
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
// /bin/sh): every other failure to run the command is the shell's exit.
func startError(spec startSpec, err error) error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("error starting process '%s': %w", userCommand(spec.cmd, spec.args), err))
}

// userCommand is how envd names a command in its messages.
func userCommand(cmd string, args []string) string {
	return strings.Join(append([]string{cmd}, args...), " ")
}

// wait reaps p and publishes its end once its output ended: like envd, when
// every holder of its stdout and stderr (a background child too) closed
// them, or after a SIGTERM or SIGKILL (design/envd.md, Streams).
func (t *processTable) wait(p *process, readers []*os.File, wg *sync.WaitGroup, deadline time.Time) {
	if !deadline.IsZero() {
		// The kill fails only when p has already exited: nothing is left to kill.
		timer := time.AfterFunc(time.Until(deadline), func() { _ = p.signal(syscall.SIGKILL) })
		defer timer.Stop()
	}
	err := p.cmd.Wait()
	t.spawnMu.Lock()
	delete(t.owned, p.cmd.Process.Pid)
	t.spawnMu.Unlock()
	drained := make(chan struct{})
	go func() {
		wg.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-p.outputStopped:
		for _, r := range readers {
			_ = r.SetReadDeadline(time.Now().Add(killDrain))
		}
		<-drained
	}
	closeAll(readers...)

	st := p.cmd.ProcessState
	end := &pb.ProcessEvent_EndEvent{ExitCode: int32(st.ExitCode()), Exited: st.Exited(), Status: st.String()} //nolint:gosec // exit codes are -1 to 255
	if err != nil {
		msg := err.Error()
		end.Error = &msg
	}
	// E2B envd's line, fields and all (handler.go Wait); written before the
	// end is published, so that whoever saw the end finds the line.
	t.log.Info(fmt.Sprintf("Process with pid %d ended", p.pid),
		"event_type", "process_end", "process_result", end,
		"stdout_bytes", p.outBytes[0].Load(), "stderr_bytes", p.outBytes[1].Load(), "pty_bytes", p.outBytes[2].Load())
	p.finish(end)
	time.AfterFunc(t.retention, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.procs[p.pid] == p {
			delete(t.procs, p.pid)
		}
	})
}

// readOutput publishes the output of reader index (stdout, stderr, or the
// PTY) in chunks of at most 32 KiB (16 KiB for a PTY) until EOF, or until
// the read deadline that wait sets after a kill.
func (p *process) readOutput(r *os.File, index int) {
	chunk := pipeChunk
	if p.tty != nil {
		chunk = ptyChunk
	}
	buf := make([]byte, chunk)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if p.tty != nil {
				p.outBytes[2].Add(int64(n))
			} else {
				p.outBytes[index].Add(int64(n))
			}
			b := make([]byte, n)
			copy(b, buf[:n])
			data := &pb.ProcessEvent_DataEvent{}
			switch {
			case p.tty != nil:
				data.Output = &pb.ProcessEvent_DataEvent_Pty{Pty: b}
			case index == 0:
				data.Output = &pb.ProcessEvent_DataEvent_Stdout{Stdout: b}
			default:
				data.Output = &pb.ProcessEvent_DataEvent_Stderr{Stderr: b}
			}
			p.publish(&pb.ProcessEvent{Event: &pb.ProcessEvent_Data{Data: data}})
		}
		if err != nil {
			// EOF, EIO from a PTY whose last slave closed, or the drain deadline.
			return
		}
	}
}

// publish hands ev to every attached stream, waiting for slow ones (that is
// the back-pressure that bounds memory) unless they detach.
func (p *process) publish(ev *pb.ProcessEvent) {
	p.mu.Lock()
	subs := make([]*subscriber, 0, len(p.subs))
	for s := range p.subs {
		subs = append(subs, s)
	}
	p.mu.Unlock()
	for _, s := range subs {
		select {
		case s.events <- ev:
		case <-s.gone:
		}
	}
}

// finish records the end and hands it to the attached streams; streams that
// attach later get the retained end from attach instead.
func (p *process) finish(end *pb.ProcessEvent_EndEvent) {
	p.mu.Lock()
	p.end = end
	subs := p.subs
	p.subs = map[*subscriber]struct{}{}
	close(p.done)
	p.mu.Unlock()
	ev := &pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: end}}
	for s := range subs {
		select {
		case s.events <- ev:
		case <-s.gone:
		}
	}
}

// subscribe attaches a stream. It must not be called after the process ended
// (see attach).
func (p *process) subscribe() *subscriber {
	s := &subscriber{events: make(chan *pb.ProcessEvent, subscriberBuffer), gone: make(chan struct{})}
	p.subs[s] = struct{}{}
	return s
}

// attach attaches a stream to a running process, or returns the retained
// end of a finished one.
func (p *process) attach() (*subscriber, *pb.ProcessEvent_EndEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.end != nil {
		return nil, p.end
	}
	return p.subscribe(), nil
}

func (p *process) detach(s *subscriber) {
	p.mu.Lock()
	delete(p.subs, s)
	p.mu.Unlock()
	close(s.gone)
}

func (p *process) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// signal sends sig to the process's whole group (the PTY session leader's
// group for PTY processes). SIGTERM and SIGKILL also stop the wait for the
// output to end, as in envd: the end follows the process's exit even when a
// child that left the group still holds stdout. Signalling a process that
// exited while its output is still open is not an error.
func (p *process) signal(sig syscall.Signal) error {
	if sig == syscall.SIGTERM || sig == syscall.SIGKILL {
		p.stopOutput()
	}
	if err := syscall.Kill(-int(p.pid), sig); err == nil {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// writeInput writes stdin or PTY input, whichever the process takes; the
// wrong kind is an internal error, as in envd.
func (p *process) writeInput(in *pb.ProcessInput) error {
	switch in := in.GetInput().(type) {
	case *pb.ProcessInput_Stdin:
		if p.tty != nil {
			return connect.NewError(connect.CodeInternal, fmt.Errorf("process %d has a PTY: send input as pty", p.pid))
		}
		if p.stdin == nil {
			return connect.NewError(connect.CodeInternal, fmt.Errorf("process %d has no stdin pipe", p.pid))
		}
		if _, err := p.stdin.Write(in.Stdin); err != nil {
			return connect.NewError(connect.CodeInternal, fmt.Errorf("write stdin of process %d: %w", p.pid, err))
		}
	case *pb.ProcessInput_Pty:
		if p.tty == nil {
			return connect.NewError(connect.CodeInternal, fmt.Errorf("process %d has no PTY: send input as stdin", p.pid))
		}
		if _, err := p.tty.Write(in.Pty); err != nil {
			return connect.NewError(connect.CodeInternal, fmt.Errorf("write PTY of process %d: %w", p.pid, err))
		}
	default:
		return connect.NewError(connect.CodeInvalidArgument, errors.New("input is empty"))
	}
	return nil
}

func (p *process) closeStdin() error {
	if p.tty != nil {
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has a PTY: send Ctrl+D (0x04) instead", p.pid))
	}
	if p.stdin == nil {
		return nil
	}
	// Closing twice is a no-op: exec's stdin pipe closes once.
	_ = p.stdin.Close()
	return nil
}

func (p *process) resize(size *pb.PTY_Size) error {
	if p.tty == nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("process %d has no PTY", p.pid))
	}
	if err := setWinsize(p.tty, size); err != nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("resize PTY of process %d: %w", p.pid, err))
	}
	return nil
}

// find resolves a selector to a process, running or retained.
func (t *processTable) find(sel *pb.ProcessSelector) (*process, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch s := sel.GetSelector().(type) {
	case *pb.ProcessSelector_Pid:
		if p, ok := t.procs[s.Pid]; ok {
			return p, nil
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", s.Pid))
	case *pb.ProcessSelector_Tag:
		var found *process
		for _, p := range t.procs {
			if p.tag == nil || *p.tag != s.Tag {
				continue
			}
			// A running process wins over a finished one with the same tag.
			if found == nil || (p.running() && !found.running()) {
				found = p
			}
		}
		if found != nil {
			return found, nil
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with tag %s not found", s.Tag))
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("process selector is empty"))
	}
}

// findRunning is find restricted to processes that have not ended.
func (t *processTable) findRunning(sel *pb.ProcessSelector) (*process, error) {
	p, err := t.find(sel)
	if err != nil {
		return nil, err
	}
	if !p.running() {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", p.pid))
	}
	return p, nil
}

func (t *processTable) list() []*pb.ProcessInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*pb.ProcessInfo
	for _, p := range t.procs {
		if p.running() {
			out = append(out, &pb.ProcessInfo{Config: p.config, Pid: p.pid, Tag: p.tag})
		}
	}
	return out
}

func (t *processTable) killAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.procs {
		if p.running() {
			_ = p.signal(syscall.SIGKILL)
		}
	}
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
