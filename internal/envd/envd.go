// Package envd holds the facts of the envd protocol that its daemon
// (envd/server), its client (envd/client) and the local server share: the
// ports, the protocol version we implement, the names of its headers, the
// deadline file's format and its CORS policy. It imports nothing of this
// module but the cors library.
package envd

import (
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/cors"
)

// Port is the port envd listens on inside every sandbox.
const Port = 49983

// EgressProxyPort is where, on the sandbox's loopback, envd offers the
// local server's egress proxy to the sandbox's processes (--egress-listen).
const EgressProxyPort = 49984

// TmpKeepFile is put in an empty /tmp by the local server before it starts
// a container under gVisor, whose runsc otherwise mounts a tmpfs of the
// sandbox's own over an empty /tmp: its files would stay out of the
// container's file system (build images, snapshots, a boot again). envd
// removes it as it starts, once runsc has looked.
const TmpKeepFile = "/tmp/.e2b-keep-tmp"

// Version is the envd protocol version our daemon implements; builds record
// it and sandboxes report it.
const Version = "0.6.13"

// Header names of the envd protocol and of the sandbox proxy in front of it.
const (
	// HeaderAccessToken carries the token /init set, on every request after it.
	HeaderAccessToken = "X-Access-Token"
	// HeaderSandboxID and HeaderSandboxPort route a request through the
	// sandbox proxy (https://sandbox.<domain>) to a port of a sandbox.
	HeaderSandboxID   = "E2b-Sandbox-Id"
	HeaderSandboxPort = "E2b-Sandbox-Port"
	// HeaderKeepalive is the interval, in seconds, at which a streaming
	// process RPC sends keepalive pings.
	HeaderKeepalive = "Keepalive-Ping-Interval"
)

// CORS is envd's answer to browser pages, as rs/cors with E2B envd's
// main.go options answers: any request header, connect-go's headers and
// these exposed, 2 h preflight cache. The local server answers with it too
// for the preflights of header-routed sandbox traffic (design/envd.md).
var CORS = cors.Policy{
	ExposeHeaders: []string{"Grpc-Status", "Grpc-Message", "Grpc-Status-Details-Bin", "Location", "Cache-Control", "X-Content-Type-Options"},
	MaxAge:        2 * time.Hour,
}
