package engine

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
)

// newEnvdClient is a client of the envd that dial reaches (a container's,
// through its channel), sending token (none when empty) with every request;
// Init must hand envd the same token, which it requires from then on.
func newEnvdClient(dial func(ctx context.Context) (net.Conn, error), token string) *client.Client {
	transport := &http.Transport{
		DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		DisableCompression:  true,
		MaxIdleConnsPerHost: 8,
	}
	hc := &http.Client{Transport: transport}
	// The host name is never resolved: every connection goes through dial.
	c, err := client.New(client.Config{BaseURL: "http://localhost", AccessToken: token, HTTPClient: hc})
	if err != nil {
		panic(fmt.Sprintf("envd client for a fixed loopback URL: %v", err)) // cannot happen
	}
	return c
}
