package client

import (
	"context"
	"net"
	"net/http"
)

// UnixSocketTransport returns an HTTP transport whose every connection goes
// to the unix socket at path, where a local envd listens (the local server
// publishes each container's envd that way); the host of a request URL is
// never resolved. Callers set any further transport options on the result.
func UnixSocketTransport(path string) *http.Transport {
	return &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
}
