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
)

// Main is the `envd` subcommand of the provider binary:
//
//	envd --listen 127.0.0.1:49983|unix:///path/envd.sock [--default-user U] [--default-workdir D]
//
// It serves until SIGINT or SIGTERM and returns the exit code.
func Main(args []string) int {
	flags := flag.NewFlagSet("envd", flag.ContinueOnError)
	listen := flags.String("listen", "127.0.0.1:49983", "TCP address host:port, or unix:///path/to/socket")
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
	srv := New(Config{DefaultUser: *defaultUser, DefaultWorkdir: *defaultWorkdir, ReapOrphans: true})
	fmt.Fprintf(os.Stderr, "envd %s listening on %s\n", Version, *listen)
	if err := srv.Serve(ctx, ln); err != nil {
		fmt.Fprintln(os.Stderr, "envd:", err)
		return 1
	}
	return 0
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
