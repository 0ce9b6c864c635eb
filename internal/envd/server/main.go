package server

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/relay"
)

// Main is the `envd` subcommand of the provider binary:
//
//	envd --listen 127.0.0.1:49983|unix:///path/envd.sock [--default-user U] [--default-workdir D]
//	     [--relay unix:///run/e2b/relay.sock] [--egress unix:///run/e2b/egress.sock --egress-listen 127.0.0.1:49984]
//
// With --relay, envd dials out to the local server's relay socket and
// serves the streams the server asks for to ports of its own network
// namespace (see package relay). With --egress, it offers the server's
// HTTP(S) egress proxy on --egress-listen and points every process it
// starts there (HTTP_PROXY, HTTPS_PROXY, NO_PROXY and their lower-case
// forms).
//
// It serves until SIGINT or SIGTERM and returns the exit code.
func Main(args []string) int {
	flags := flag.NewFlagSet("envd", flag.ContinueOnError)
	listen := flags.String("listen", "127.0.0.1:49983", "TCP address host:port, or unix:///path/to/socket")
	relayAddr := flags.String("relay", "", "unix:///path of the local server's relay socket to dial out to (optional)")
	egressAddr := flags.String("egress", "", "unix:///path of the local server's egress proxy socket (optional)")
	egressListen := flags.String("egress-listen", "127.0.0.1:49984", "where processes in the sandbox reach the egress proxy (with --egress)")
	defaultUser := flags.String("default-user", "", "user for requests that name none (default root; POST /init may change it)")
	defaultWorkdir := flags.String("default-workdir", "", "working directory for processes started without one (default the user's home)")
	version := flags.Bool("version", false, "print the envd protocol version and exit")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "envd: unexpected arguments %q\n", flags.Args())
		return 2
	}
	if *version {
		fmt.Println(Version)
		return 0
	}
	ln, err := listenOn(*listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "envd:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// As a container's entrypoint envd is PID 1; elsewhere it becomes the
	// subreaper of what it starts. Either way orphans are its to reap.
	if err := becomeSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, "envd: cannot become a child subreaper, orphans may stay zombies:", err)
	}
	cfg := Config{DefaultUser: *defaultUser, DefaultWorkdir: *defaultWorkdir, ReapOrphans: true}
	if *egressAddr != "" {
		socket, ok := strings.CutPrefix(*egressAddr, "unix://")
		if !ok {
			fmt.Fprintln(os.Stderr, "envd: --egress must be unix:///path")
			return 2
		}
		eln, err := net.Listen("tcp", *egressListen)
		if err != nil {
			fmt.Fprintln(os.Stderr, "envd: egress listener:", err)
			return 1
		}
		go spliceTo(ctx, eln, socket)
		cfg.BaseEnv = ProxyEnv("http://" + eln.Addr().String())
		fmt.Fprintf(os.Stderr, "envd: egress proxy offered on %s\n", eln.Addr())
	}
	if *relayAddr != "" {
		socket, ok := strings.CutPrefix(*relayAddr, "unix://")
		if !ok {
			fmt.Fprintln(os.Stderr, "envd: --relay must be unix:///path")
			return 2
		}
		dial := relay.DialLocal
		if own, isUnix := strings.CutPrefix(*listen, "unix://"); isUnix {
			// envd's own port, as the server names it, is this socket.
			dial = func(ctx context.Context, port int) (net.Conn, error) {
				if port == envd.Port {
					var d net.Dialer
					return d.DialContext(ctx, "unix", own)
				}
				return relay.DialLocal(ctx, port)
			}
		}
		go func() {
			_ = relay.Serve(ctx, relay.AgentOptions{Socket: socket, Dial: dial, Logf: func(f string, a ...any) {
				fmt.Fprintf(os.Stderr, "envd: relay: "+f+"\n", a...)
			}})
		}()
	}
	srv := New(cfg)
	fmt.Fprintf(os.Stderr, "envd %s listening on %s\n", Version, *listen)
	if err := srv.Serve(ctx, ln); err != nil {
		fmt.Fprintln(os.Stderr, "envd:", err)
		return 1
	}
	return 0
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
