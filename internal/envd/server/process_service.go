//go:build linux

package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	pb "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process"
)

// processService implements process.Process (design/e2b-api.md §6.2).
type processService struct {
	s *Server
}

func (ps *processService) Start(ctx context.Context, req *connect.Request[pb.StartRequest], stream *connect.ServerStream[pb.StartResponse]) error {
	u, err := ps.s.rpcUser(req.Header())
	if err != nil {
		return err
	}
	cfg := req.Msg.GetProcess()
	if cfg == nil {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process config is missing"))
	}
	st := ps.s.settings()
	cwd, err := processCwd(u, cfg.GetCwd(), st.defaultWorkdir)
	if err != nil {
		return err
	}
	spec := startSpec{
		user:   u,
		cmd:    cfg.GetCmd(),
		args:   cfg.GetArgs(),
		env:    processEnv(u, st.sandboxEnv(), cfg.GetEnvs()),
		cwd:    cwd,
		stdin:  req.Msg.Stdin == nil || req.Msg.GetStdin(),
		pty:    req.Msg.GetPty(),
		tag:    req.Msg.Tag,
		config: cfg,
	}
	spec.timeout, _ = ctx.Deadline()
	p, sub, err := ps.s.procs.start(spec)
	if err != nil {
		return err
	}
	defer p.detach(sub)
	send := func(ev *pb.ProcessEvent) error { return stream.Send(&pb.StartResponse{Event: ev}) }
	if err := send(startEvent(p.pid)); err != nil {
		return err
	}
	return streamEvents(ctx, keepaliveInterval(req.Header()), sub, send)
}

func (ps *processService) Connect(ctx context.Context, req *connect.Request[pb.ConnectRequest], stream *connect.ServerStream[pb.ConnectResponse]) error {
	if _, err := ps.s.rpcUser(req.Header()); err != nil {
		return err
	}
	p, err := ps.s.procs.find(req.Msg.GetProcess())
	if err != nil {
		return err
	}
	send := func(ev *pb.ProcessEvent) error { return stream.Send(&pb.ConnectResponse{Event: ev}) }
	sub, end := p.attach()
	if sub != nil {
		defer p.detach(sub)
	}
	if err := send(startEvent(p.pid)); err != nil {
		return err
	}
	if end != nil {
		return send(&pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: end}})
	}
	return streamEvents(ctx, keepaliveInterval(req.Header()), sub, send)
}

func (ps *processService) List(_ context.Context, req *connect.Request[pb.ListRequest]) (*connect.Response[pb.ListResponse], error) {
	if _, err := ps.s.rpcUser(req.Header()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.ListResponse{Processes: ps.s.procs.list()}), nil
}

func (ps *processService) SendInput(_ context.Context, req *connect.Request[pb.SendInputRequest]) (*connect.Response[pb.SendInputResponse], error) {
	if _, err := ps.s.rpcUser(req.Header()); err != nil {
		return nil, err
	}
	p, err := ps.s.procs.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.writeInput(req.Msg.GetInput()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.SendInputResponse{}), nil
}

func (ps *processService) StreamInput(_ context.Context, stream *connect.ClientStream[pb.StreamInputRequest]) (*connect.Response[pb.StreamInputResponse], error) {
	if _, err := ps.s.rpcUser(stream.RequestHeader()); err != nil {
		return nil, err
	}
	var p *process
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().(type) {
		case *pb.StreamInputRequest_Start:
			if p != nil {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("start sent twice"))
			}
			found, err := ps.s.procs.find(ev.Start.GetProcess())
			if err != nil {
				return nil, err
			}
			p = found
		case *pb.StreamInputRequest_Data:
			if p == nil {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("the first message must be start"))
			}
			if err := p.writeInput(ev.Data.GetInput()); err != nil {
				return nil, err
			}
		case *pb.StreamInputRequest_Keepalive:
		default:
			return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("stream input message is empty"))
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.StreamInputResponse{}), nil
}

func (ps *processService) SendSignal(_ context.Context, req *connect.Request[pb.SendSignalRequest]) (*connect.Response[pb.SendSignalResponse], error) {
	if _, err := ps.s.rpcUser(req.Header()); err != nil {
		return nil, err
	}
	var sig syscall.Signal
	switch req.Msg.GetSignal() {
	case pb.Signal_SIGNAL_SIGTERM:
		sig = syscall.SIGTERM
	case pb.Signal_SIGNAL_SIGKILL:
		sig = syscall.SIGKILL
	default:
		return nil, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("signal %s is not supported", req.Msg.GetSignal()))
	}
	p, err := ps.s.procs.findRunning(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.signal(sig); err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("signal process %d: %w", p.pid, err))
	}
	return connect.NewResponse(&pb.SendSignalResponse{}), nil
}

func (ps *processService) CloseStdin(_ context.Context, req *connect.Request[pb.CloseStdinRequest]) (*connect.Response[pb.CloseStdinResponse], error) {
	if _, err := ps.s.rpcUser(req.Header()); err != nil {
		return nil, err
	}
	p, err := ps.s.procs.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.closeStdin(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.CloseStdinResponse{}), nil
}

func (ps *processService) Update(_ context.Context, req *connect.Request[pb.UpdateRequest]) (*connect.Response[pb.UpdateResponse], error) {
	if _, err := ps.s.rpcUser(req.Header()); err != nil {
		return nil, err
	}
	p, err := ps.s.procs.findRunning(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if req.Msg.GetPty() != nil {
		if err := p.resize(req.Msg.GetPty().GetSize()); err != nil {
			return nil, err
		}
	}
	return connect.NewResponse(&pb.UpdateResponse{}), nil
}

func startEvent(pid uint32) *pb.ProcessEvent {
	return &pb.ProcessEvent{Event: &pb.ProcessEvent_Start{Start: &pb.ProcessEvent_StartEvent{Pid: pid}}}
}

// streamEvents sends the events of sub until the end event, with a keepalive
// after every interval without data. When the stream's context ends first
// the stream detaches (the process keeps running) and ends with the
// context's error: at a Connect-Timeout-Ms deadline that is
// deadline_exceeded without an end event, as in envd, while the deadline
// kills a Start's process (design/envd.md, Lifetime).
func streamEvents(ctx context.Context, interval time.Duration, sub *subscriber, send func(*pb.ProcessEvent) error) error {
	keepalive := time.NewTimer(interval)
	defer keepalive.Stop()
	for {
		select {
		case ev := <-sub.events:
			if ev.GetEnd() != nil && pastDeadline(ctx) {
				// The end of a process the deadline killed races the deadline:
				// the kill's timer may run before the context's.
				if err := ctx.Err(); err != nil {
					return err
				}
				return context.DeadlineExceeded
			}
			if err := send(ev); err != nil {
				return err
			}
			if ev.GetEnd() != nil {
				return nil
			}
			keepalive.Reset(interval)
		case <-keepalive.C:
			if err := send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Keepalive{Keepalive: &pb.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
			keepalive.Reset(interval)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// pastDeadline tells whether ctx has ended or its deadline has come, whether
// or not the context's own timer has run yet.
func pastDeadline(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && !time.Now().Before(deadline)
}

// keepaliveInterval reads Keepalive-Ping-Interval (seconds).
func keepaliveInterval(h http.Header) time.Duration {
	if n, err := strconv.Atoi(h.Get(envd.HeaderKeepalive)); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return defaultKeepalive
}

// processCwd applies envd's cwd rules: empty → default workdir → home; "~"
// expansion; relative → home; it must exist.
func processCwd(u *osUser, requested, defaultWorkdir string) (string, error) {
	cwd := requested
	if cwd == "" {
		cwd = defaultWorkdir
	}
	if cwd == "" {
		cwd = u.home
	}
	resolved := u.expandPath(cwd)
	fi, err := os.Stat(resolved)
	if err != nil || !fi.IsDir() {
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd '%s' does not exist", resolved))
		}
		return "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd '%s': %w", resolved, err))
	}
	return resolved, nil
}

// processEnv is the environment in envd's order: PATH, HOME, USER, LOGNAME,
// the sandbox-wide variables, the request's; exec keeps the last value of a
// repeated name, so later wins.
func processEnv(u *osUser, sandbox, request map[string]string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = defaultPath
	}
	env := []string{"PATH=" + path, "HOME=" + u.home, "USER=" + u.name, "LOGNAME=" + u.name}
	for _, vars := range []map[string]string{sandbox, request} {
		keys := make([]string, 0, len(vars))
		for k := range vars {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			env = append(env, k+"="+vars[k])
		}
	}
	return env
}
