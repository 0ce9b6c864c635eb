//go:build linux

package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strings"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/relay"
)

// RunOptions configure Run: the settings of the `envd` command (its flags,
// internal/command).
type RunOptions struct {
	// Listen is a TCP address host:port, or unix:///path/to/socket.
	Listen string
	// EgressSocket, when set, is the path of the local server's egress proxy
	// socket, offered to the sandbox's processes on EgressListen; every
	// process envd starts is pointed there (HTTP_PROXY, HTTPS_PROXY,
	// NO_PROXY and their lower-case forms).
	EgressSocket, EgressListen string
	// DeadlineFile, when set, is a file holding the sandbox's end as Unix
	// milliseconds in decimal, written (and moved) by the local server only.
	// envd reads it every DeadlinePoll and, once the end has passed, stops
	// serving and kills its processes, which ends the container: a sandbox
	// ends on time even while the server is down. A missing or unreadable
	// file sets no deadline.
	DeadlineFile string
	// DeadlinePoll is how often DeadlineFile is read (default 250 ms).
	DeadlinePoll time.Duration
	// DefaultUser and DefaultWorkdir are Config's.
	DefaultUser, DefaultWorkdir string
	// MemoryLimit, when set (bytes), makes envd the sandbox's
	// out-of-memory killer, for gVisor, whose kernel has none: see
	// watchMemory.
	MemoryLimit uint64
	// Log receives envd's messages, NewLogger's JSON lines.
	Log io.Writer
}

// Run serves envd as o says until ctx ends, reaping orphans as the
// container's init (or subreaper).
func Run(ctx context.Context, o RunOptions) error {
	base := NewLogger(o.Log)
	logger := base.With("logger", "envd")
	ln, err := listenOn(o.Listen)
	if err != nil {
		return err
	}
	// As a container's entrypoint envd is PID 1; elsewhere it becomes the
	// subreaper of what it starts. Either way orphans are its to reap.
	if err := becomeSubreaper(); err != nil {
		logger.Warn("cannot become a child subreaper, orphans may stay zombies: " + err.Error())
	}
	// Put there only for runsc's look at /tmp, which has happened.
	if err := os.Remove(envd.TmpKeepFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		logger.Warn("cannot remove " + envd.TmpKeepFile + ": " + err.Error())
	}
	if o.DeadlineFile != "" {
		var stop context.CancelFunc
		ctx, stop = context.WithCancel(ctx)
		defer stop()
		go watchDeadline(ctx, o.DeadlineFile, o.DeadlinePoll, func(end time.Time) {
			logger.Info("the sandbox's end " + end.UTC().Format(time.RFC3339Nano) + " has passed: stopping")
			stop()
		})
	}
	if o.MemoryLimit > 0 {
		go watchMemory(ctx, o.MemoryLimit, gVisorMemoryUsage, logger)
		logger.Info(fmt.Sprintf("envd kills the largest process when the sandbox's processes use %d MiB", o.MemoryLimit>>20))
	}
	cfg := Config{DefaultUser: o.DefaultUser, DefaultWorkdir: o.DefaultWorkdir, ReapOrphans: true, Logger: base}
	if o.EgressSocket != "" {
		eln, err := net.Listen("tcp", o.EgressListen)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("egress listener: %w", err)
		}
		go spliceTo(ctx, eln, o.EgressSocket)
		cfg.BaseEnv = ProxyEnv("http://" + eln.Addr().String())
		logger.Info("egress proxy offered on " + eln.Addr().String())
	}
	srv := New(cfg)
	logger.Info("envd " + envd.Version + " listening on " + o.Listen)
	return srv.Serve(ctx, ln)
}

// watchDeadline reads the deadline file every poll until ctx ends and calls
// passed once the time it holds has come.
func watchDeadline(ctx context.Context, path string, poll time.Duration, passed func(time.Time)) {
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		if end, ok := ReadDeadline(path); ok && !time.Now().Before(end) {
			passed(end)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// ReadDeadline reads a deadline file (see RunOptions.DeadlineFile).
func ReadDeadline(path string) (time.Time, bool) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, false
	}
	return envd.ParseDeadline(raw)
}

// ProxyEnv is the environment that points HTTP clients at an egress proxy
// while keeping the sandbox's own loopback direct.
func ProxyEnv(proxyURL string) map[string]string {
	env := map[string]string{}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		env[k] = proxyURL
	}
	env["NO_PROXY"] = "localhost,127.0.0.1,::1"
	env["no_proxy"] = env["NO_PROXY"]
	// Node 24+'s fetch and http ignore the variables above without it.
	env["NODE_USE_ENV_PROXY"] = "1"
	return env
}

// spliceTo pipes every connection accepted on ln to the unix socket at
// path until ctx ends.
func spliceTo(ctx context.Context, ln net.Listener, path string) {
	context.AfterFunc(ctx, func() { ln.Close() })
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		go func() {
			var d net.Dialer
			up, err := d.DialContext(ctx, "unix", path)
			if err != nil {
				c.Close()
				return
			}
			relay.Pipe(c, up)
		}()
	}
}

// listenOn listens on a TCP address or, for unix://path, on a unix socket.
// A stale socket file from an earlier run is replaced. The socket is made
// connectable by every user: it lives in a directory the host mounts, and
// the access token set by /init is what guards it, as it guards TCP envd.
func listenOn(addr string) (net.Listener, error) {
	path, isUnix := strings.CutPrefix(addr, "unix://")
	if !isUnix {
		return net.Listen("tcp", addr)
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSocket != 0 {
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o666); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("chmod socket %s: %w", path, err)
	}
	return ln, nil
}
