// Package safehttp holds the transport rules every client of this provider
// follows, so that an API key or envd access token never travels in clear
// text to another machine: plain http only to loopback hosts, and no redirect
// that changes host or downgrades https to http (Go's default client would
// follow such a redirect and forward the credentials).
package safehttp

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// ParseBaseURL parses raw as the base URL of a service reached with
// credentials. what names the setting in errors (for example "api_url").
func ParseBaseURL(what, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s %q is not a valid URL: %w", what, raw, err)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%s %q has no host; expected a URL such as https://api.e2b.app", what, raw)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !IsLoopbackHost(u.Hostname()) {
			return nil, fmt.Errorf("%s %q uses http:// to a host that is not loopback; credentials would travel in clear text, use https://", what, raw)
		}
	default:
		return nil, fmt.Errorf("%s %q must use https:// (or http:// to a loopback host)", what, raw)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%s %q must not carry user information", what, raw)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}

// IsLoopbackHost reports whether host (without port) names this machine:
// a loopback IP, "localhost", or a name under ".localhost" (RFC 6761).
func IsLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
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

// Harden returns a copy of c (or of a new client when c is nil) whose
// redirects follow CheckRedirect and then c's own policy, if it had one.
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
	return &hardened
}
