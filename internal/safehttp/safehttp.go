// Package safehttp holds the rule every client of this provider follows so that an
// API key or envd access token never travels in clear text to another machine, and the
// checks the provider's configuration is validated with, so that what passes validation
// is what the clients accept:
//
//   - a base URL (ParseBaseURL) is an absolute https:// URL, or http:// to a loopback
//     host (IsLoopbackHost), without user information, query or fragment;
//   - a domain (ValidateDomain) is a bare DNS name: the clients put it after "api." or
//     "sandbox." in an https:// URL, so a scheme, port or path has no place in it;
//   - a hardened client (Harden) follows no redirect that changes host or downgrades
//     https to http (Go's default client would follow it and forward the credentials),
//     and reaches localhost names on loopback without asking DNS.
package safehttp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// ParseBaseURL parses raw as the base URL of a service reached with credentials and
// returns it without a trailing slash. what names the setting in errors (for example
// "api_url"); an error never repeats user information.
func ParseBaseURL(what, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s %q is not a valid URL: %w", what, raw, err)
	}
	if u.User != nil {
		c := *u
		c.User = url.User("REDACTED")
		return nil, fmt.Errorf("%s %q must not carry user information: credentials are not sent in URLs", what, c.String())
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%s %q has no host; it must be an absolute URL such as https://api.e2b.app", what, raw)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !IsLoopbackHost(u.Hostname()) {
			return nil, fmt.Errorf("%s %q uses http:// to a host that is not loopback; credentials would travel in clear text, use https://", what, raw)
		}
	default:
		return nil, fmt.Errorf("%s %q must use https:// (or http:// to a loopback host): an absolute URL such as https://api.e2b.app", what, raw)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return nil, fmt.Errorf("%s %q must not have a query or fragment", what, raw)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = strings.TrimSuffix(u.RawPath, "/")
	return u, nil
}

// IsLoopbackHost reports whether host (without port) names this machine: a loopback
// IP, "localhost", or a name under ".localhost" (RFC 6761). A hardened client connects
// to such names on loopback (Harden), so plain http to them stays on this machine.
func IsLoopbackHost(host string) bool {
	if isLocalhostName(host) {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

func isLocalhostName(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// ValidateDomain accepts a bare DNS name such as "e2b.app": dot-separated labels of
// letters, digits, '-' and '_', with no scheme, port, path or user information.
func ValidateDomain(domain string) error {
	if domain == "" {
		return errors.New("domain is empty")
	}
	for label := range strings.SplitSeq(domain, ".") {
		if label == "" || strings.TrimLeft(strings.ToLower(label), "abcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			return fmt.Errorf("domain %q must be a bare DNS name such as e2b.app, without scheme, port or path", domain)
		}
	}
	return nil
}

// ErrUnsafeRedirect is returned (wrapped) when a redirect is refused.
var ErrUnsafeRedirect = errors.New("refused an unsafe redirect")

// CheckRedirect refuses redirects that leave the original host or move from
// https to http, and stops after 10 hops like Go's default policy.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) == 0 {
		return nil
	}
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	first := via[0].URL
	if !strings.EqualFold(req.URL.Host, first.Host) {
		return fmt.Errorf("%w from %s to another host %s", ErrUnsafeRedirect, first.Host, req.URL.Host)
	}
	if first.Scheme == "https" && req.URL.Scheme != "https" {
		return fmt.Errorf("%w from https to %s on %s", ErrUnsafeRedirect, req.URL.Scheme, req.URL.Host)
	}
	return nil
}

// Harden returns a copy of c (or of a new client when c is nil) whose redirects follow
// CheckRedirect and then c's own policy, if it had one. When its transport is Go's (nil
// or an *http.Transport), the copy dials localhost names on loopback instead of asking
// the resolver, which could answer with another machine; another transport (a test's)
// does its own dialing.
func Harden(c *http.Client) *http.Client {
	var hardened http.Client
	if c != nil {
		hardened = *c
	}
	own := hardened.CheckRedirect
	hardened.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := CheckRedirect(req, via); err != nil {
			return err
		}
		if own != nil {
			return own(req, via)
		}
		return nil
	}
	switch rt := hardened.Transport.(type) {
	case nil:
		if t := sharedTransport(); t != nil {
			hardened.Transport = t
		}
	case *http.Transport:
		t := rt.Clone()
		t.DialContext = loopbackDialer(t.DialContext)
		hardened.Transport = t
	}
	return &hardened
}

// sharedTransport is Go's default transport dialing localhost names on loopback, one
// for every client hardened without a transport of its own, so that they share a
// connection pool as they would sharing http.DefaultTransport.
var sharedTransport = sync.OnceValue(func() *http.Transport {
	d, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return nil
	}
	t := d.Clone()
	t.DialContext = loopbackDialer(t.DialContext)
	return t
})

// loopbackDialer dials localhost names at 127.0.0.1, then ::1, and everything else with
// dial (a net.Dialer when nil).
func loopbackDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || !isLocalhostName(host) {
			return dial(ctx, network, addr)
		}
		conn, err := dial(ctx, network, net.JoinHostPort("127.0.0.1", port))
		if err != nil {
			if conn6, err6 := dial(ctx, network, net.JoinHostPort("::1", port)); err6 == nil {
				return conn6, nil
			}
		}
		return conn, err
	}
}
