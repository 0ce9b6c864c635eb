// Package e2bapi is the HTTP client of the E2B control-plane API
// (templates, builds, tags, sandboxes); the JSON wire types it sends and
// E2B's name grammar are package e2b, which the local server shares. It is a
// plain package: no Terraform types. See design/e2b-api.md "Control-plane conventions", "Template build flow", "Names, aliases, tags" and "Sandbox lifecycle to run one command".
package e2bapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/safehttp"
)

// Defaults of Config.
const (
	defaultUserAgent      = "terraform-provider-e2b/dev"
	DefaultRequestTimeout = 60 * time.Second
	defaultUploadTimeout  = time.Hour
	defaultRetryWaitMin   = 500 * time.Millisecond
	defaultRetryWaitMax   = 10 * time.Second
)

// maxRetryAfter bounds how long a Retry-After header can make one retry wait.
const maxRetryAfter = 5 * time.Minute

// maxResponseBody bounds how much of a response is read, so a broken server
// cannot exhaust memory; a page of 100 templates is a few hundred KiB.
const maxResponseBody = 32 << 20

// Logger receives one entry per attempt of every call. The provider adapts
// tflog to it. Field values never contain the API key.
type Logger interface {
	Debug(ctx context.Context, msg string, fields map[string]any)
	Info(ctx context.Context, msg string, fields map[string]any)
	Warn(ctx context.Context, msg string, fields map[string]any)
}

type noopLogger struct{}

func (noopLogger) Debug(context.Context, string, map[string]any) {}
func (noopLogger) Info(context.Context, string, map[string]any)  {}
func (noopLogger) Warn(context.Context, string, map[string]any)  {}

// Config configures a Client.
type Config struct {
	// BaseURL is the resolved control-plane URL, e.g. https://api.e2b.app.
	// http:// is accepted for loopback hosts only.
	BaseURL string
	// APIKey is sent as X-API-Key to BaseURL and nowhere else.
	APIKey string
	// UserAgent defaults to defaultUserAgent. E2B keys template build formats
	// on SDK user agents, so one is refused.
	UserAgent string
	// RequestTimeout bounds each attempt of an API call (DefaultRequestTimeout
	// when zero).
	RequestTimeout time.Duration
	// UploadTimeout bounds each attempt of an archive upload
	// (defaultUploadTimeout when zero).
	UploadTimeout time.Duration
	// MaxRetries is the number of retries after the first attempt; 0 means
	// none.
	MaxRetries int
	// RetryWaitMin and RetryWaitMax bound the exponential backoff between
	// attempts (defaults defaultRetryWaitMin, defaultRetryWaitMax); a
	// Retry-After header takes precedence.
	RetryWaitMin, RetryWaitMax time.Duration
	// HTTPClient is optional; its Transport is used, its redirect policy is
	// hardened with safehttp and its Timeout replaced by the ones above.
	HTTPClient *http.Client
	// Logger is optional (no logging when nil).
	Logger Logger
}

// Client calls the E2B control-plane API. It is safe for concurrent use.
type Client struct {
	base      *url.URL
	apiKey    string
	userAgent string
	logger    Logger
	maxRetry  int
	api       *retryablehttp.Client
	upload    *retryablehttp.Client
	// sandboxV1 is set once a server showed it has no POST /v2/sandboxes.
	sandboxV1 atomic.Bool
}

// New checks cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	base, err := safehttp.ParseBaseURL("E2B API URL", cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	if cfg.APIKey == "" {
		return nil, errors.New("E2B API client: no API key")
	}
	ua := cfg.UserAgent
	if ua == "" {
		ua = defaultUserAgent
	}
	if strings.Contains(ua, "e2b-js-sdk/") || strings.Contains(ua, "e2b-python-sdk/") {
		return nil, fmt.Errorf("user agent %q names an E2B SDK; the E2B server picks template build formats by SDK version, so send the provider's own", ua)
	}
	if cfg.MaxRetries < 0 {
		return nil, fmt.Errorf("MaxRetries is %d; it must not be negative", cfg.MaxRetries)
	}
	c := &Client{base: base, apiKey: cfg.APIKey, userAgent: ua, logger: cfg.Logger, maxRetry: cfg.MaxRetries}
	if c.logger == nil {
		c.logger = noopLogger{}
	}
	c.api = c.retryingClient(cfg, orDefault(cfg.RequestTimeout, DefaultRequestTimeout))
	c.upload = c.retryingClient(cfg, orDefault(cfg.UploadTimeout, defaultUploadTimeout))
	return c, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func (c *Client) retryingClient(cfg Config, timeout time.Duration) *retryablehttp.Client {
	hc := safehttp.Harden(cfg.HTTPClient)
	hc.Timeout = timeout
	return &retryablehttp.Client{
		HTTPClient:      hc,
		RetryWaitMin:    orDefault(cfg.RetryWaitMin, defaultRetryWaitMin),
		RetryWaitMax:    orDefault(cfg.RetryWaitMax, defaultRetryWaitMax),
		RetryMax:        cfg.MaxRetries,
		RequestLogHook:  c.logAttempt,
		ResponseLogHook: c.logResponse,
		CheckRetry:      c.checkRetry,
		Backoff:         c.backoff,
		// Hand the last answer back when retries run out, so its error
		// envelope is parsed like any other.
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
	}
}

// callState follows one call through its attempts, for logging and for the
// retry policy (which sees no request when the connection failed).
type callState struct {
	method string
	logURL string
	// secret is hidden from logs and errors besides the API key: the query
	// of a presigned upload URL, which carries its signature.
	secret  string
	attempt int
	started time.Time
}

type callStateKey struct{}

func withCallState(ctx context.Context, method, logURL, secret string) context.Context {
	return context.WithValue(ctx, callStateKey{}, &callState{method: method, logURL: logURL, secret: secret})
}

func callStateOf(ctx context.Context) *callState {
	if st, ok := ctx.Value(callStateKey{}).(*callState); ok {
		return st
	}
	return &callState{}
}

func (c *Client) logAttempt(_ retryablehttp.Logger, req *http.Request, retry int) {
	st := callStateOf(req.Context())
	st.attempt, st.started = retry+1, time.Now()
	c.log(req.Context(), c.logger.Debug, "E2B API request", map[string]any{
		"method": st.method, "url": st.logURL, "attempt": st.attempt,
	})
}

func (c *Client) logResponse(_ retryablehttp.Logger, resp *http.Response) {
	ctx := resp.Request.Context()
	st := callStateOf(ctx)
	level := c.logger.Debug
	if resp.StatusCode >= 400 {
		level = c.logger.Info
	}
	c.log(ctx, level, "E2B API response", map[string]any{
		"method": st.method, "url": st.logURL, "attempt": st.attempt,
		"status": resp.StatusCode, "duration_ms": time.Since(st.started).Milliseconds(),
	})
}

// log sends an entry with every string value scrubbed of the API key, in
// case a server echoes it back in an error message.
func (c *Client) log(ctx context.Context, level func(context.Context, string, map[string]any), msg string, fields map[string]any) {
	for k, v := range fields {
		switch v := v.(type) {
		case string:
			fields[k] = c.redact(ctx, v)
		case error:
			fields[k] = c.redact(ctx, v.Error())
		}
	}
	level(ctx, msg, fields)
}

func (c *Client) redact(ctx context.Context, s string) string {
	for _, secret := range []string{c.apiKey, callStateOf(ctx).secret} {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "[redacted]")
		}
	}
	return s
}

// checkRetry is the retry policy. Idempotent calls (GET, PUT, DELETE, and
// PATCH, which here only sets a boolean) are retried on connection errors,
// 429, 502, 503 and 504. POSTs are retried only when the outcome proves the
// request was not processed: 429 and 503, or a connection that was never
// established. A refused redirect or an untrusted certificate is never
// retried.
func (c *Client) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return false, ctxErr
	}
	st := callStateOf(ctx)
	retry, why := shouldRetry(st.method, resp, err)
	fields := map[string]any{"method": st.method, "url": st.logURL, "attempt": st.attempt}
	if err != nil {
		fields["error"] = err
	} else {
		fields["status"] = resp.StatusCode
	}
	switch {
	case retry && st.attempt <= c.maxRetry:
		fields["reason"] = why
		c.log(ctx, c.logger.Warn, "retrying E2B API request", fields)
	case err != nil:
		c.log(ctx, c.logger.Warn, "E2B API request failed", fields)
	}
	return retry, nil
}

func shouldRetry(method string, resp *http.Response, err error) (bool, string) {
	idempotent := method != http.MethodPost
	if err != nil {
		var unknownAuthority x509.UnknownAuthorityError
		var certInvalid x509.CertificateInvalidError
		var hostname x509.HostnameError
		var verification *tls.CertificateVerificationError
		switch {
		case errors.Is(err, safehttp.ErrUnsafeRedirect),
			errors.As(err, &unknownAuthority), errors.As(err, &certInvalid),
			errors.As(err, &hostname), errors.As(err, &verification):
			return false, ""
		case idempotent:
			return true, "connection error"
		case isDialError(err):
			return true, "connection not established"
		}
		return false, ""
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return true, resp.Status
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		return idempotent, resp.Status
	}
	return false, ""
}

// isDialError reports whether err happened while connecting, before any
// byte of the request was sent.
func isDialError(err error) bool {
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "dial"
}

// longRetryWait is the wait before a retry that is logged as a warning: the apply looks
// stuck meanwhile.
const longRetryWait = 10 * time.Second

// backoff is backoff, logged: what the client waits for and how long, a warning when the
// wait is long (such as a Retry-After of minutes).
func (c *Client) backoff(waitMin, waitMax time.Duration, attempt int, resp *http.Response) time.Duration {
	d := backoff(waitMin, waitMax, attempt, resp)
	if resp == nil || resp.Request == nil {
		return d
	}
	ctx := resp.Request.Context()
	st := callStateOf(ctx)
	fields := map[string]any{
		"method": st.method, "url": st.logURL, "attempt": st.attempt, "status": resp.StatusCode,
		"wait_ms": d.Milliseconds(), "wait": d.String(),
	}
	msg := "waiting before retrying the E2B API request"
	if h := resp.Header.Get("Retry-After"); h != "" {
		fields["retry_after"] = h
		msg = "waiting before retrying the E2B API request, as its Retry-After header asks"
		if d == maxRetryAfter {
			msg += fmt.Sprintf(" (at most %s)", maxRetryAfter)
		}
	}
	level := c.logger.Debug
	switch {
	case d >= longRetryWait:
		level = c.logger.Warn
	case fields["retry_after"] != nil:
		level = c.logger.Info
	}
	c.log(ctx, level, msg, fields)
	return d
}

// backoff waits as long as a Retry-After header asks (seconds or an HTTP
// date, at most maxRetryAfter), else exponentially from waitMin to waitMax.
func backoff(waitMin, waitMax time.Duration, attempt int, resp *http.Response) time.Duration {
	if resp != nil {
		if d, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return d
		}
	}
	return retryablehttp.DefaultBackoff(waitMin, waitMax, attempt, nil)
}

func retryAfter(value string, now time.Time) (time.Duration, bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	var d time.Duration
	if secs, err := strconv.ParseUint(value, 10, 32); err == nil {
		d = time.Duration(secs) * time.Second
	} else if at, err := http.ParseTime(value); err == nil {
		d = at.Sub(now)
	} else {
		return 0, false
	}
	return min(max(d, 0), maxRetryAfter), true
}

// call sends one API request: in, when not nil, as the JSON body; a 2xx
// JSON answer decoded into out when out is not nil. Any other answer is an
// *APIError. path is already escaped.
func (c *Client) call(ctx context.Context, method, path string, query url.Values, in, out any) error {
	_, err := c.exchange(ctx, method, path, query, in, out)
	return err
}

// exchange is call that also returns the answer's headers, for the paged lists
// (X-Next-Token).
func (c *Client) exchange(ctx context.Context, method, path string, query url.Values, in, out any) (http.Header, error) {
	target := c.base.String() + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var body any
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encoding the body of %s %s: %w", method, path, err)
		}
		body = data
	}
	ctx = withCallState(ctx, method, target, "")
	req, err := retryablehttp.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, fmt.Errorf("E2B API %s %s: %w", method, path, err)
	}
	req.Header.Set("X-API-Key", c.apiKey)
	req.Header.Set("User-Agent", c.userAgent)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.api.Do(req)
	if err != nil {
		return nil, fmt.Errorf("E2B API %s %s: %w%s", method, path, redactedError{c.redact(ctx, err.Error()), err}, c.unreachableHint(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, c.apiError(ctx, method, path, resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBody))
		return resp.Header, nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	if err != nil {
		return nil, fmt.Errorf("E2B API %s %s: reading the %d answer: %w", method, path, resp.StatusCode, err)
	}
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(out); err != nil {
		return nil, fmt.Errorf("E2B API %s %s: the %d answer is not the expected JSON: %w", method, path, resp.StatusCode, err)
	}
	return resp.Header, nil
}

// unreachableHint says, when err is a failure to connect at all (refused,
// unknown host, no route), which URL was tried and what to check; "" for
// any other error, such as a cancelled request or a refused redirect.
func (c *Client) unreachableHint(err error) string {
	var opErr *net.OpError
	var dnsErr *net.DNSError
	if !errors.As(err, &opErr) && !errors.As(err, &dnsErr) {
		return ""
	}
	return fmt.Sprintf(". No E2B API answered at %s: check that api_url (or E2B_API_URL, else the one domain gives) "+
		"names it and that it is running and reachable from here. "+
		"For the local server, start it with `terraform-provider-e2b server` and use the E2B_API_URL it prints", c.base)
}

// redactedError prints as its scrubbed text and unwraps to the original, so
// errors.Is still finds safehttp.ErrUnsafeRedirect or a context error.
type redactedError struct {
	text string
	err  error
}

func (e redactedError) Error() string { return e.text }
func (e redactedError) Unwrap() error { return e.err }
