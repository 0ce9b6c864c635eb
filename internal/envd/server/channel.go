//go:build linux

package server

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/relay"
)

// RunChannel serves the local server's channel (package relay) on standard
// input and output for the envd that o describes: streams to envd's port
// and the container's other ports, the egress proxy socket envd forwards
// to (o.EgressSocket) and, with it, the sandbox's resolver on
// 127.0.0.1:53 (DNSListen), the sandbox's end (o.DeadlineFile). The server
// starts it through the engine's exec API, so only the engine holds its
// standard streams; it seals itself first (relay.Seal) so that nothing in
// the sandbox can reach them through /proc or ptrace.
func RunChannel(ctx context.Context, o RunOptions) error {
	if err := relay.Seal(); err != nil {
		return err
	}
	// The run dir is a tmpfs the server made root's alone; the engine copies
	// the mode of a directory an image committed there, so set it again.
	for _, f := range []string{o.EgressSocket, o.DeadlineFile} {
		if f != "" {
			if err := os.Chmod(filepath.Dir(f), 0o700); err != nil {
				return err
			}
		}
	}
	dial := relay.DialLocal
	if own, isUnix := strings.CutPrefix(o.Listen, "unix://"); isUnix {
		// envd's own port, as the server names it, is this socket.
		dial = func(ctx context.Context, port int) (net.Conn, error) {
			if port == envd.Port {
				var d net.Dialer
				return d.DialContext(ctx, "unix", own)
			}
			return relay.DialLocal(ctx, port)
		}
	}
	opts := relay.AgentOptions{
		Dial: dial, EgressSocket: o.EgressSocket, DeadlineFile: o.DeadlineFile,
		// Its standard error is the server's log of the agent.
		Warn: func(msg string) { fmt.Fprintln(os.Stderr, msg) },
	}
	if o.EgressSocket != "" {
		// Wherever the egress proxy is the way out, names are resolved by
		// the server too, under the same policy; the container's
		// resolv.conf points here.
		opts.DNSListen = DNSListen
	}
	return relay.ServeAgent(ctx, relay.StdioConn{In: os.Stdin, Out: os.Stdout}, opts)
}

// DNSListen is where the channel agent answers the sandbox's DNS queries.
const DNSListen = "127.0.0.1:53"
