package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	envdserver "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/server"
)

const envdIntro = "Usage: terraform-provider-e2b envd [flags]\n\n" +
	"The daemon inside the local server's sandboxes, which the server starts in each container."

// Envd is the `envd` subcommand of the provider binary:
//
//	envd --listen 127.0.0.1:49983|unix:///path/envd.sock [--default-user U] [--default-workdir D]
//	     [--egress unix:///run/e2b/egress.sock --egress-listen 127.0.0.1:49984]
//	     [--deadline-file /run/e2b/deadline] [--channel]
//	envd --extract DIR
//	envd --held-deleted
//
// With --egress, envd offers the egress proxy behind that socket on
// --egress-listen (envd/server.RunOptions); with --deadline-file, it stops
// once the time in that file has passed. With --channel it is not envd
// but the local server's channel agent for the envd the other flags
// describe (envd/server.RunChannel): the server starts it through the
// engine's exec API and speaks to it on standard input and output. With
// --extract it only writes the tar archive on its standard input below DIR
// (envd/server.Extract): the server's COPY into a running build
// container, started the same way. With --held-deleted it prints the
// bytes held by files deleted but still open in the container
// (envd/server.HeldByDeleted): the server's disk watchdog runs it.
//
// It serves until SIGINT or SIGTERM and returns the exit code: 0 (also for
// --help), 2 for bad flags, 1 when envd fails.
func Envd(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("envd", flag.ContinueOnError)
	listen := flags.String("listen", fmt.Sprintf("127.0.0.1:%d", envd.Port), "TCP address host:port, or unix:///path/to/socket")
	egressAddr := flags.String("egress", "", "unix:///path of the socket behind which the egress proxy is reached (optional)")
	egressListen := flags.String("egress-listen", fmt.Sprintf("127.0.0.1:%d", envd.EgressProxyPort), "where processes in the sandbox reach the egress proxy (with --egress)")
	deadlineFile := flags.String("deadline-file", "", "file with the sandbox's end in Unix milliseconds; envd stops once it has passed (optional)")
	defaultUser := flags.String("default-user", "", "user for requests that name none (default root; POST /init may change it)")
	defaultWorkdir := flags.String("default-workdir", "", "working directory for processes started without one (default the user's home)")
	channel := flags.Bool("channel", false, "serve the local server's channel on standard input and output for the envd these flags describe (started by the server)")
	extract := flags.String("extract", "", "write the tar archive on standard input below this directory, with its owners and modes, and exit (started by the server)")
	heldDeleted := flags.Bool("held-deleted", false, "print the bytes held by files deleted but still open on the root file system, and exit (started by the server)")
	memoryLimitMB := flags.Uint64("memory-limit-mb", 0, "the sandbox's memory: when its processes use more, envd kills the largest of them, for a runtime whose kernel does not (gVisor; 0: none)")
	version := flags.Bool("version", false, "print the envd protocol version and exit")
	if err := parseFlags(flags, args, envdIntro, stdout); err != nil {
		return usageExit(stderr, "envd", err)
	}
	if *version {
		fmt.Fprintln(stdout, envd.Version)
		return 0
	}
	if *extract != "" {
		if err := envdserver.Extract(os.Stdin, *extract); err != nil {
			fmt.Fprintln(stderr, "envd --extract:", err)
			return 1
		}
		return 0
	}
	if *heldDeleted {
		held, err := envdserver.HeldByDeleted("/proc", "/")
		if err != nil {
			fmt.Fprintln(stderr, "envd --held-deleted:", err)
			return 1
		}
		fmt.Fprintln(stdout, held)
		return 0
	}
	opts := envdserver.RunOptions{
		Listen: *listen, EgressListen: *egressListen, DeadlineFile: *deadlineFile,
		DefaultUser: *defaultUser, DefaultWorkdir: *defaultWorkdir, MemoryLimit: *memoryLimitMB << 20, Log: stderr,
	}
	var ok bool
	if *egressAddr != "" {
		if opts.EgressSocket, ok = strings.CutPrefix(*egressAddr, "unix://"); !ok {
			return usageExit(stderr, "envd", errors.New("--egress must be unix:///path"))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *channel {
		if err := envdserver.RunChannel(ctx, opts); err != nil {
			fmt.Fprintln(stderr, "envd --channel:", err)
			return 1
		}
		return 0
	}
	if err := envdserver.Run(ctx, opts); err != nil {
		fmt.Fprintln(stderr, "envd:", err)
		return 1
	}
	return 0
}
