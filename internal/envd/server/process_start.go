//go:build linux

package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"connectrpc.com/connect"

	pb "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process"
)

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

// processCwd resolves the cwd as envd does (resolvePath); only a missing
// one is refused here: a cwd that is no directory fails the exec, as on
// envd ("fork/exec /bin/sh: not a directory").
func processCwd(u *osUser, requested, defaultWorkdir string) (string, error) {
	resolved, err := u.resolvePath(requested, defaultWorkdir)
	if err != nil {
		return "", connect.NewError(connect.CodeInvalidArgument, err)
	}
	if _, err := os.Stat(resolved); errors.Is(err, fs.ErrNotExist) {
		return "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd '%s' does not exist", resolved))
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

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
