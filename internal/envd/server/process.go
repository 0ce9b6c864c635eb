//go:build linux

package server

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"connectrpc.com/connect"

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

// process is one started command. Its output goes to the streams attached at
// the moment it is read; with none attached it is discarded.
type process struct {
	pid    uint32
	tag    *string
	config *pb.ProcessConfig
	cmd    *exec.Cmd

	// stdin is nil when stdin is /dev/null, the process has a PTY, or
	// CloseStdin closed it; stdinMu orders writes against the close.
	stdinMu sync.Mutex
	stdin   io.WriteCloser
	tty     *os.File // PTY master, nil without a PTY

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

// writeInput writes stdin or PTY input, whichever the process takes, with
// envd's codes and messages (its input.go and handler.go): the wrong kind is
// internal, an empty input unimplemented.
func (p *process) writeInput(in *pb.ProcessInput) error {
	switch in := in.GetInput().(type) {
	case *pb.ProcessInput_Stdin:
		if err := p.writeStdin(in.Stdin); err != nil {
			return connect.NewError(connect.CodeInternal, fmt.Errorf("error writing to stdin: %w", err))
		}
	case *pb.ProcessInput_Pty:
		if err := p.writeTTY(in.Pty); err != nil {
			return connect.NewError(connect.CodeInternal, fmt.Errorf("error writing to tty: %w", err))
		}
	default:
		return connect.NewError(connect.CodeUnimplemented, fmt.Errorf("invalid input type %T", in))
	}
	return nil
}

func (p *process) writeStdin(data []byte) error {
	if p.tty != nil {
		return errors.New("tty assigned to process — input should be written to the pty, not the stdin")
	}
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin == nil {
		return errors.New("stdin not enabled or closed")
	}
	if _, err := p.stdin.Write(data); err != nil {
		return fmt.Errorf("error writing to stdin of process '%d': %w", p.pid, err)
	}
	return nil
}

func (p *process) writeTTY(data []byte) error {
	if p.tty == nil {
		return errors.New("tty not assigned to process — input should be written to the stdin, not the tty")
	}
	if _, err := p.tty.Write(data); err != nil {
		return fmt.Errorf("error writing to tty of process '%d': %w", p.pid, err)
	}
	return nil
}

// closeStdin sends EOF. Closing twice is a no-op; a PTY process has no
// stdin of its own to close (envd's unknown, its answer for this).
func (p *process) closeStdin() error {
	if p.tty != nil {
		return connect.NewError(connect.CodeUnknown, errors.New("error closing stdin: cannot close stdin for PTY process — send Ctrl+D (0x04) instead"))
	}
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin == nil {
		return nil
	}
	err := p.stdin.Close()
	p.stdin = nil // no close error is worth retrying
	if err != nil {
		return connect.NewError(connect.CodeUnknown, fmt.Errorf("error closing stdin: %w", err))
	}
	return nil
}

func (p *process) resize(size *pb.PTY_Size) error {
	if p.tty == nil {
		return connect.NewError(connect.CodeInternal, errors.New("error resizing tty: tty not assigned to process"))
	}
	if err := setWinsize(p.tty, size); err != nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("error resizing tty: %w", err))
	}
	return nil
}
