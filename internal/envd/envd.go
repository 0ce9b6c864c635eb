// Package envd holds the facts of the envd protocol that its daemon
// (envd/server), its client (envd/client) and the local server share: the
// port, the protocol version we implement and the names of its headers.
// It imports nothing of this module.
package envd

// Port is the port envd listens on inside every sandbox.
const Port = 49983

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
