package client

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process"
)

// Stream names an output stream of a process.
type Stream int

const (
	Stdout Stream = iota + 1
	Stderr
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return "stream(" + strconv.Itoa(int(s)) + ")"
}

const (
	// DefaultMaxOutputBytes is the per-stream capture cap when a request
	// sets none.
	DefaultMaxOutputBytes = 1 << 20
	// keepaliveSeconds is the Keepalive-Ping-Interval the SDK sends: envd
	// emits a keepalive event after that many silent seconds, which keeps
	// idle proxies from closing a quiet stream.
	keepaliveSeconds = "50"
	// stdinChunkBytes bounds one SendInput message.
	stdinChunkBytes = 64 << 10
	// killTimeout bounds the SendSignal that cleans up after an aborted run.
	killTimeout = 10 * time.Second
)

// RunRequest is one command to run to completion.
type RunRequest struct {
	// Command is a shell string, run as /bin/bash -l -c <Command>.
	Command string
	// Cmd and Args are an explicit program and its arguments, used instead of
	// Command. Exactly one of Command and Cmd must be set.
	Cmd  string
	Args []string
	// Env is added to the sandbox's environment (it wins over it).
	Env map[string]string
	// Cwd is the working directory; empty means envd's default workdir, else
	// the user's home.
	Cwd string
	// User is the OS user to run as; empty means envd's default user.
	User string
	// Stdin, when not nil, is read to its end, sent to the process and
	// followed by EOF; nil gives the process no stdin at all. Run returns only
	// after it stopped reading Stdin, so Stdin must not block indefinitely.
	Stdin io.Reader
	// Timeout, when positive, is the remote deadline (Connect-Timeout-Ms):
	// envd kills the process when it elapses, and so does Run.
	Timeout time.Duration
	// MaxOutputBytes caps the bytes captured per stream; 0 means
	// DefaultMaxOutputBytes. Excess output is discarded and flagged in the
	// result.
	MaxOutputBytes int64
	// Tag labels the process in envd; empty means a random tag. Run kills the
	// process by this tag when it gives up on it.
	Tag string
	// OnOutput, when set, sees every chunk of output as it arrives, including
	// what exceeds the cap (build logs). It runs on Run's goroutine: a slow
	// callback slows the stream.
	OnOutput func(stream Stream, chunk []byte)
}

// RunResult is what a process did.
type RunResult struct {
	PID      uint32
	ExitCode int  // -1 when killed by a signal
	Exited   bool // true only for a normal exit
	Status   string
	Error    string // envd's error text, e.g. "exit status 3"

	Stdout, Stderr                   []byte
	StdoutTruncated, StderrTruncated bool

	// StdinEOFUnsupported: envd is older than 0.5.2 and answered CloseStdin
	// with unimplemented, so no EOF was sent after the input.
	StdinEOFUnsupported bool
	// StdinError says why the input was not all delivered, typically because
	// the process exited or closed its stdin first; empty when it was.
	StdinError string
}

// Run starts the command, feeds its stdin, captures its output and waits for
// it to end. A non-zero exit code is not an error; the caller decides. Errors:
//   - *ProcessError when the process did not exit normally (e.g. killed);
//   - *UserError or *CwdError when envd refused the user or working directory;
//   - errors wrapping ctx.Err() or, for Timeout, context.DeadlineExceeded.
//
// Whenever Run gives up on a running process (cancellation, timeout, a
// broken stream) it kills it by tag before returning. Once the process has
// started the result is returned with the error too, holding what was
// captured.
func (c *Client) Run(ctx context.Context, req RunRequest) (*RunResult, error) {
	cfg, err := req.processConfig()
	if err != nil {
		return nil, err
	}
	limit := req.MaxOutputBytes
	switch {
	case limit == 0:
		limit = DefaultMaxOutputBytes
	case limit < 0:
		return nil, fmt.Errorf("max output bytes %d is negative", limit)
	}
	tag := req.Tag
	if tag == "" {
		tag = "run-" + rand.Text()
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("run %s: %w", req.describe(), err)
	}

	runCtx := ctx
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	// The stdin feeder cancels the stream with a cause when the caller's
	// reader fails; connect-go turns the deadline into Connect-Timeout-Ms.
	streamCtx, cancelStream := context.WithCancelCause(runCtx)
	defer cancelStream(nil)

	r := &run{
		client:       c,
		req:          &req,
		op:           "run " + req.describe(),
		tag:          tag,
		result:       &RunResult{},
		stdout:       newCapture(limit),
		stderr:       newCapture(limit),
		cancelStream: cancelStream,
	}
	startReq := newRequest(&process.StartRequest{
		Process: cfg,
		Tag:     &tag,
		Stdin:   proto.Bool(req.Stdin != nil),
	}, req.User)
	startReq.Header().Set(envd.HeaderKeepalive, keepaliveSeconds)
	stream, err := c.process.Start(streamCtx, startReq)
	if err != nil {
		// The request may have reached envd before it failed: finish decides
		// whether there is a process to kill.
		return r.finish(ctx, runCtx, err)
	}
	streamErr := r.receive(streamCtx, stream)
	_ = stream.Close() // releases the connection; the outcome is already known
	r.waitStdin()
	return r.finish(ctx, runCtx, streamErr)
}

// run is the state of one Run call.
type run struct {
	client       *Client
	req          *RunRequest
	op           string
	tag          string
	result       *RunResult
	stdout       *capture
	stderr       *capture
	cancelStream context.CancelCauseFunc

	started  bool
	end      *process.ProcessEvent_EndEvent
	stdinRun chan struct{} // closed when the stdin feeder is done; nil if none
	// stdinReadErr is set by the feeder when the caller's Stdin failed.
	stdinReadErr error
}

// receive reads events until the stream ends and returns the stream's error.
func (r *run) receive(ctx context.Context, stream *connect.ServerStreamForClient[process.StartResponse]) error {
	for stream.Receive() {
		if r.end != nil {
			continue // nothing follows the end event but the end of the stream
		}
		switch ev := stream.Msg().GetEvent().GetEvent().(type) {
		case *process.ProcessEvent_Start:
			if r.started {
				continue
			}
			r.started = true
			r.result.PID = ev.Start.GetPid()
			if r.req.Stdin != nil {
				r.stdinRun = make(chan struct{})
				go r.feedStdin(ctx, r.result.PID)
			}
		case *process.ProcessEvent_Data:
			r.output(ev.Data)
		case *process.ProcessEvent_End:
			r.end = ev.End
		case *process.ProcessEvent_Keepalive:
		}
	}
	return stream.Err()
}

func (r *run) output(data *process.ProcessEvent_DataEvent) {
	stream, chunk := Stdout, data.GetStdout()
	switch out := data.GetOutput().(type) {
	case *process.ProcessEvent_DataEvent_Stderr:
		stream, chunk = Stderr, out.Stderr
	case *process.ProcessEvent_DataEvent_Pty:
		chunk = out.Pty // Run never asks for a PTY; treat one as stdout
	}
	if r.req.OnOutput != nil {
		r.req.OnOutput(stream, chunk)
	}
	if stream == Stderr {
		r.stderr.write(chunk)
	} else {
		r.stdout.write(chunk)
	}
}

// feedStdin sends the caller's input in chunks after the start event, then
// EOF. It runs beside receive so that a process that writes while it reads
// cannot deadlock against us.
func (r *run) feedStdin(ctx context.Context, pid uint32) {
	defer close(r.stdinRun)
	selector := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
	buf := make([]byte, stdinChunkBytes)
	for {
		n, err := r.req.Stdin.Read(buf)
		if n > 0 {
			_, sendErr := r.client.process.SendInput(ctx, newRequest(&process.SendInputRequest{
				Process: selector,
				Input:   &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: buf[:n]}},
			}, r.req.User))
			if sendErr != nil {
				r.result.StdinError = "sending stdin: " + sendErr.Error()
				return
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// Half an input could make a command do the wrong thing: abort.
			r.stdinReadErr = fmt.Errorf("%s: reading stdin: %w", r.op, err)
			r.cancelStream(r.stdinReadErr)
			return
		}
	}
	_, err := r.client.process.CloseStdin(ctx, newRequest(&process.CloseStdinRequest{Process: selector}, r.req.User))
	switch {
	case connect.CodeOf(err) == connect.CodeUnimplemented:
		r.result.StdinEOFUnsupported = true
	case connect.CodeOf(err) == connect.CodeNotFound:
		// The process ended before the EOF, after taking all of the input.
	case err != nil:
		r.result.StdinError = "closing stdin: " + err.Error()
	}
}

func (r *run) waitStdin() {
	if r.stdinRun != nil {
		<-r.stdinRun
	}
}

// finish turns what was received into Run's answer, killing the process
// when it may still be running.
func (r *run) finish(ctx, runCtx context.Context, streamErr error) (*RunResult, error) {
	res := r.result
	res.Stdout, res.StdoutTruncated = r.stdout.buf, r.stdout.truncated
	res.Stderr, res.StderrTruncated = r.stderr.buf, r.stderr.truncated
	if !r.started && r.end == nil {
		res = nil
	}

	timedOut := ctx.Err() == nil && (runCtx.Err() != nil || remoteDeadlinePassed(runCtx))
	if r.end != nil {
		res.ExitCode = int(r.end.GetExitCode())
		res.Exited = r.end.GetExited()
		res.Status = r.end.GetStatus()
		res.Error = r.end.GetError()
		switch {
		case res.Exited:
			return res, nil
		case timedOut: // envd killed it at the remote deadline
			return res, r.timeoutError()
		}
		return res, &ProcessError{Op: r.op, ExitCode: res.ExitCode, Status: res.Status, Message: res.Error, Result: res}
	}

	var err error
	switch {
	case ctx.Err() != nil:
		err = fmt.Errorf("%s: %w", r.op, ctx.Err())
	case timedOut:
		err = r.timeoutError()
	case r.stdinReadErr != nil:
		err = r.stdinReadErr
	case streamErr != nil && !r.started && refusedToStart(streamErr):
		return nil, startError(r.op, r.req, streamErr) // nothing runs, nothing to kill
	case streamErr != nil:
		err = rpcError(r.op, r.req.User, streamErr)
	default:
		err = fmt.Errorf("%s: envd closed the stream without an end event", r.op)
	}
	if killErr := r.client.kill(ctx, r.tag, r.req.User); killErr != nil {
		err = fmt.Errorf("%w (and the process may still run: %v)", err, killErr)
	}
	return res, err
}

// remoteDeadlinePassed reports whether envd's deadline for the stream may
// have passed. envd counts the Connect-Timeout-Ms that connect-go derived
// from ctx's deadline, truncated to the millisecond, from when the request
// reached it, so its deadline is at most a millisecond before ctx's: an end
// event it sent for a kill at its deadline arrives after that instant. The
// clock is read here because ctx.Err() lags behind the deadline on a busy
// machine (the timer that sets it has yet to run).
func remoteDeadlinePassed(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	return ok && !time.Now().Before(deadline.Add(-time.Millisecond))
}

func (r *run) timeoutError() error {
	return fmt.Errorf("%s: still running after the %s timeout: %w", r.op, r.req.Timeout, context.DeadlineExceeded)
}

// refusedToStart reports whether envd answered Start with a refusal, in which
// case no process exists.
func refusedToStart(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeUnauthenticated, connect.CodePermissionDenied:
		return true
	}
	return false
}

// kill sends SIGKILL to the process tagged tag. It uses a fresh context with
// its own short deadline because ctx is often the one that was cancelled.
// not_found means the process is already gone.
func (c *Client) kill(ctx context.Context, tag, user string) error {
	killCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
	defer cancel()
	_, err := c.process.SendSignal(killCtx, newRequest(&process.SendSignalRequest{
		Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Tag{Tag: tag}},
		Signal:  process.Signal_SIGNAL_SIGKILL,
	}, user))
	if err != nil && connect.CodeOf(err) != connect.CodeNotFound {
		return fmt.Errorf("killing the process tagged %q: %w", tag, err)
	}
	return nil
}

// processConfig checks the request and builds envd's ProcessConfig.
func (req *RunRequest) processConfig() (*process.ProcessConfig, error) {
	cfg := &process.ProcessConfig{Envs: req.Env}
	switch {
	case req.Command != "" && req.Cmd != "":
		return nil, errors.New("run request sets both a shell command and a program; set one")
	case req.Command != "":
		if len(req.Args) > 0 {
			return nil, errors.New("run request sets arguments for a shell command; put them in the command or use a program")
		}
		cfg.Cmd, cfg.Args = "/bin/bash", []string{"-l", "-c", req.Command}
	case req.Cmd != "":
		cfg.Cmd, cfg.Args = req.Cmd, req.Args
	default:
		return nil, errors.New("run request has nothing to run: set a shell command or a program")
	}
	if req.Cwd != "" {
		cfg.Cwd = &req.Cwd
	}
	return cfg, nil
}

// describe names the command in errors, shortened so that a long script
// does not bury the message.
func (req *RunRequest) describe() string {
	s := req.Command
	if s == "" {
		s = strings.Join(append([]string{req.Cmd}, req.Args...), " ")
	}
	const maxRunes = 80
	if r := []rune(s); len(r) > maxRunes {
		s = string(r[:maxRunes]) + "…"
	}
	return strconv.Quote(s)
}
