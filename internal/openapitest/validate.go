package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// Option adjusts what Transport and Middleware check.
type Option func(*config)

type config struct {
	skip []func(*http.Request) bool
}

// SkipRequests passes requests for which pred is true through unvalidated.
// It is for traffic that is no operation of the spec, served by the same
// handler: envd proxy traffic (see IsSandboxTraffic) or a local upload path.
func SkipRequests(pred func(*http.Request) bool) Option {
	return func(c *config) { c.skip = append(c.skip, pred) }
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		o(&c)
	}
	return c
}

func (c config) skips(r *http.Request) bool {
	return slices.ContainsFunc(c.skip, func(p func(*http.Request) bool) bool { return p(r) })
}

var envdHostPattern = regexp.MustCompile(`^[0-9]+-[a-z0-9]+[.-]`)

// IsSandboxTraffic reports whether r is addressed to a sandbox through the
// proxy rather than to the API: it carries an E2b-Sandbox-Id header or its
// host is "<port>-<sandboxID>..." (design/e2b-api.md "Addressing envd").
func IsSandboxTraffic(r *http.Request) bool {
	return r.Header.Get("E2b-Sandbox-Id") != "" || envdHostPattern.MatchString(strings.ToLower(r.Host))
}

// Transport returns a RoundTripper that validates every request under
// apiBase, and its response, against the operation of s it matches, and
// sends it through next (http.DefaultTransport when nil). Requests to any
// other URL (such as the upload PUT to a presigned storage URL, which is no
// API operation) pass through unvalidated.
func (s *Spec) Transport(tb testing.TB, apiBase string, next http.RoundTripper, opts ...Option) http.RoundTripper {
	tb.Helper()
	base, err := url.Parse(strings.TrimSuffix(apiBase, "/"))
	if err != nil || base.Host == "" {
		tb.Fatalf("openapitest: API base %q is not an absolute URL", apiBase)
	}
	if next == nil {
		next = http.DefaultTransport
	}
	return &transport{spec: s, tb: tb, base: base, next: next, cfg: newConfig(opts)}
}

type transport struct {
	spec *Spec
	tb   testing.TB
	base *url.URL
	next http.RoundTripper
	cfg  config
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	rel, ok := t.relative(req.URL)
	if !ok || t.cfg.skips(req) {
		return t.next.RoundTrip(req)
	}
	body, err := readAll(req.Body)
	if err != nil {
		return nil, err
	}
	out := req.Clone(req.Context())
	out.Body = http.NoBody // a non-nil empty Body would be sent chunked
	if len(body) > 0 {
		out.Body = io.NopCloser(bytes.NewReader(body))
	}

	// The checks outlive the request when its response streams.
	ctx := context.WithoutCancel(req.Context())
	check := t.spec.checkRequest(ctx, req, rel, body)
	resp, err := t.next.RoundTrip(out)
	if err != nil {
		check.report(t.tb, 0)
		return nil, err
	}
	check.report(t.tb, resp.StatusCode)
	if check.route == nil {
		return resp, nil
	}
	streaming := isStreaming(resp.Header)
	var respBody []byte
	if !streaming {
		respBody, err = readAll(resp.Body)
		if err != nil {
			return nil, err
		}
		resp.Body = io.NopCloser(bytes.NewReader(respBody))
	}
	check.reportResponse(ctx, t.tb, true, resp.StatusCode, resp.Header, respBody, streaming)
	return resp, nil
}

// relative returns u as a URL relative to the API base, when u is under it.
func (t *transport) relative(u *url.URL) (*url.URL, bool) {
	if !strings.EqualFold(u.Scheme, t.base.Scheme) || !strings.EqualFold(u.Host, t.base.Host) {
		return nil, false
	}
	path, rawPath := u.Path, u.EscapedPath()
	basePath := t.base.EscapedPath()
	if !strings.HasPrefix(rawPath, basePath+"/") {
		return nil, false
	}
	rel := *u
	rel.RawPath = strings.TrimPrefix(rawPath, basePath)
	rel.Path = strings.TrimPrefix(path, t.base.Path)
	return &rel, true
}

// Middleware returns a handler that validates every request next receives
// and every response it writes against the operation of s the request
// matches. Responses are buffered to validate them, except streaming ones
// (Content-Type application/connect+* or application/octet-stream), whose
// status alone is checked.
func (s *Spec) Middleware(tb testing.TB, next http.Handler, opts ...Option) http.Handler {
	cfg := newConfig(opts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cfg.skips(r) {
			next.ServeHTTP(w, r)
			return
		}
		body, err := readAll(r.Body)
		if err != nil {
			tb.Errorf("openapitest: reading the body of %s %s: %v", r.Method, r.URL, err)
			http.Error(w, "reading the request body failed", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		ctx := context.WithoutCancel(r.Context())
		check := s.checkRequest(ctx, r, r.URL, body)

		rec := &recorder{w: w, header: http.Header{}}
		next.ServeHTTP(rec, r)
		rec.finishHeader()
		if r.Context().Err() != nil {
			// The client went away: what next answered (a reverse proxy's 502
			// for the request it cancelled) reaches no one.
			return
		}
		status := rec.status
		check.report(tb, status)
		if check.route != nil {
			check.reportResponse(ctx, tb, false, status, rec.header, rec.buf.Bytes(), rec.streaming)
		}
		if !rec.streaming {
			_, _ = w.Write(rec.buf.Bytes())
		}
	})
}

// recorder buffers a response to validate it before it is written, and
// passes streaming responses straight through.
type recorder struct {
	w           http.ResponseWriter
	header      http.Header
	status      int
	wroteHeader bool
	streaming   bool
	buf         bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.wroteHeader {
		return
	}
	r.wroteHeader, r.status = true, status
	r.streaming = isStreaming(r.header)
	dst := r.w.Header()
	for k, v := range r.header {
		dst[k] = v
	}
	if r.streaming {
		r.w.WriteHeader(status)
	} else {
		// Buffered: the length is known, so the client sees no chunking.
		dst.Del("Content-Length")
	}
}

// finishHeader sends the header of a buffered response (after validation
// the body follows); a handler that wrote nothing answered 200.
func (r *recorder) finishHeader() {
	r.WriteHeader(http.StatusOK)
	if !r.streaming {
		r.w.Header().Set("Content-Length", fmt.Sprint(r.buf.Len()))
		if r.status == http.StatusNoContent || r.status == http.StatusNotModified {
			r.w.Header().Del("Content-Length")
		}
		r.w.WriteHeader(r.status)
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	if r.streaming {
		return r.w.Write(p)
	}
	return r.buf.Write(p)
}

// Flush flushes streaming responses; buffered ones are written whole later.
func (r *recorder) Flush() {
	if r.streaming {
		http.NewResponseController(r.w).Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.w }

func isStreaming(h http.Header) bool {
	mediaType, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return strings.HasPrefix(mediaType, "application/connect+") || mediaType == "application/octet-stream"
}

func readAll(body io.ReadCloser) ([]byte, error) {
	if body == nil || body == http.NoBody {
		return nil, nil
	}
	defer body.Close()
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, fmt.Errorf("openapitest: reading a body: %w", err)
	}
	return data, nil
}

// requestCheck is the outcome of validating one request; reporting waits
// for the response because an unauthenticated request is correct when it is
// answered 401.
type requestCheck struct {
	op       string
	route    *routers.Route
	input    *openapi3filter.RequestValidationInput
	routeErr error
	err      error
}

func (s *Spec) options() *openapi3filter.Options {
	return &openapi3filter.Options{
		IncludeResponseStatus: true,
		MultiError:            true,
		AuthenticationFunc:    authenticate,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{
			openapi3.WithStringFormatValidator("uuid", openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC9562)),
		},
	}
}

func (s *Spec) checkRequest(ctx context.Context, req *http.Request, rel *url.URL, body []byte) *requestCheck {
	match := req.Clone(ctx)
	match.URL = rel
	match.Body = io.NopCloser(bytes.NewReader(body))
	c := &requestCheck{op: req.Method + " " + rel.EscapedPath()}
	route, params, err := s.router.FindRoute(match)
	if err != nil {
		c.routeErr = err
		return c
	}
	c.route = route
	c.op = route.Method + " " + route.Path
	if id := route.Operation.OperationID; id != "" {
		c.op += " (" + id + ")"
	}
	c.input = &openapi3filter.RequestValidationInput{Request: match, PathParams: params, Route: route, Options: s.options()}
	c.err = openapi3filter.ValidateRequest(ctx, c.input)
	return c
}

func (c *requestCheck) report(tb testing.TB, status int) {
	tb.Helper()
	if c.routeErr != nil {
		tb.Errorf("openapitest: %s matches no operation of the spec: %v", c.op, c.routeErr)
		return
	}
	if c.err == nil {
		return
	}
	var problems []string
	for _, p := range describe(c.err) {
		if p.security && status == http.StatusUnauthorized {
			continue // sent without credentials and refused: both ends are right
		}
		problems = append(problems, p.String())
	}
	if len(problems) > 0 {
		tb.Errorf("openapitest: request %s violates the spec:\n\t%s", c.op, strings.Join(problems, "\n\t"))
	}
}

// reportResponse checks the answer to the request; viaEdge is true for a
// client's view (Transport), which includes what E2B's edge answers.
func (c *requestCheck) reportResponse(ctx context.Context, tb testing.TB, viaEdge bool, status int, header http.Header, body []byte, streaming bool) {
	tb.Helper()
	responses := c.route.Operation.Responses
	declared := responses.Status(status)
	var marks map[string]any
	if declared != nil && declared.Value != nil {
		marks = declared.Value.Extensions
	}
	if !viaEdge && marks[edgeAnswer] == edgeAdded {
		declared, marks = nil, nil
	}
	switch {
	case marks[allowlistedStatus] != nil,
		viaEdge && status >= 300 && status < 400,
		viaEdge && marks[edgeAnswer] == edgeAdded,
		viaEdge && marks[edgeAnswer] == edgeDeclared && !isJSON(header):
		c.reportAllowlisted(tb, status, header, body, streaming)
		return
	}
	if declared == nil && responses.Default() == nil {
		var codes []string
		for code, resp := range responses.Map() {
			if viaEdge || resp.Value == nil || resp.Value.Extensions[edgeAnswer] != edgeAdded {
				codes = append(codes, code)
			}
		}
		slices.Sort(codes)
		tb.Errorf("openapitest: response %d to %s violates the spec: status %d is not declared for the operation (declared: %s)",
			status, c.op, status, strings.Join(codes, ", "))
		return
	}
	if typedAs, ok := marks[jsonTypedAs].(string); ok && header.Get("Content-Type") == typedAs {
		header = header.Clone()
		header.Set("Content-Type", "application/json")
	}
	opts := *c.input.Options
	opts.ExcludeResponseBody = streaming
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: c.input,
		Status:                 status,
		Header:                 header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &opts,
	}
	if err := openapi3filter.ValidateResponse(ctx, in); err != nil {
		var problems []string
		for _, p := range describe(err) {
			problems = append(problems, p.String())
		}
		tb.Errorf("openapitest: response %d to %s violates the spec:\n\t%s", status, c.op, strings.Join(problems, "\n\t"))
	}
}

// reportAllowlisted checks an answer with a status the allowlist added: a
// JSON body must be the spec's error envelope.
func (c *requestCheck) reportAllowlisted(tb testing.TB, status int, header http.Header, body []byte, streaming bool) {
	tb.Helper()
	errorSchema := c.route.Spec.Components.Schemas["Error"]
	if errorSchema == nil || errorSchema.Value == nil || streaming || len(body) == 0 || !isJSON(header) {
		return
	}
	var value any
	if err := json.Unmarshal(body, &value); err != nil {
		tb.Errorf("openapitest: response %d to %s violates the spec: the body is not the JSON its Content-Type says: %v", status, c.op, err)
		return
	}
	if err := errorSchema.Value.VisitJSON(value, openapi3.MultiErrors()); err != nil {
		var problems []string
		for _, p := range describeIn("error envelope", err) {
			problems = append(problems, p.String())
		}
		tb.Errorf("openapitest: response %d to %s violates the spec:\n\t%s", status, c.op, strings.Join(problems, "\n\t"))
	}
}

func isJSON(header http.Header) bool {
	mediaType, _, _ := mime.ParseMediaType(header.Get("Content-Type"))
	return mediaType == "application/json" || strings.HasSuffix(mediaType, "+json")
}

// authenticate accepts a request that carries the credential a security
// scheme names; it checks presence, not validity.
func authenticate(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	scheme := in.SecurityScheme
	req := in.RequestValidationInput.Request
	switch {
	case scheme.Type == "apiKey" && scheme.In == "header":
		if req.Header.Get(scheme.Name) == "" {
			return fmt.Errorf("header %s is missing", scheme.Name)
		}
	case scheme.Type == "apiKey" && scheme.In == "query":
		if req.URL.Query().Get(scheme.Name) == "" {
			return fmt.Errorf("query parameter %s is missing", scheme.Name)
		}
	case scheme.Type == "http":
		prefix := strings.ToLower(scheme.Scheme) + " "
		if !strings.HasPrefix(strings.ToLower(req.Header.Get("Authorization")), prefix) {
			return fmt.Errorf("an Authorization: %s header is missing", scheme.Scheme)
		}
	default:
		return fmt.Errorf("security scheme type %q in %q is not checked by openapitest", scheme.Type, scheme.In)
	}
	return nil
}

// problem is one mismatch: where it is, which field, what value, and why.
type problem struct {
	where, field, value, reason string
	security                    bool
}

func (p problem) String() string {
	var b strings.Builder
	b.WriteString(p.where)
	if p.field != "" {
		fmt.Fprintf(&b, ": field %s", p.field)
	}
	if p.value != "" {
		fmt.Fprintf(&b, ": value %s", p.value)
	}
	fmt.Fprintf(&b, ": %s", p.reason)
	return b.String()
}

func describe(err error) []problem {
	return describeIn("", err)
}

func describeIn(where string, err error) []problem {
	switch e := err.(type) { //nolint:errorlint // kin-openapi returns these types unwrapped; describeIn walks their own nesting
	case openapi3.MultiError:
		var out []problem
		for _, inner := range e {
			out = append(out, describeIn(where, inner)...)
		}
		return out
	case *openapi3filter.SecurityRequirementsError:
		reasons := make([]string, 0, len(e.Errors))
		for _, inner := range e.Errors {
			reasons = append(reasons, inner.Error())
		}
		return []problem{{where: join(where, "credentials"), reason: "none of the accepted credentials is present (" + strings.Join(reasons, "; ") + ")", security: true}}
	case *openapi3filter.RequestError:
		w := join(where, "request body")
		if e.Parameter != nil {
			w = join(where, e.Parameter.In+" parameter "+e.Parameter.Name)
		}
		if e.Err != nil {
			return describeIn(w, e.Err)
		}
		return []problem{{where: w, reason: e.Reason}}
	case *openapi3filter.ResponseError:
		w := join(where, "response")
		if e.Err != nil {
			inner := describeIn(join(w, "body"), e.Err)
			for i := range inner {
				if e.Reason != "" && !strings.Contains(inner[i].reason, e.Reason) {
					inner[i].reason = e.Reason + ": " + inner[i].reason
				}
			}
			return inner
		}
		return []problem{{where: w, reason: e.Reason}}
	case *openapi3.SchemaError:
		var field string
		if pointer := e.JSONPointer(); len(pointer) > 0 {
			field = "/" + strings.Join(pointer, "/")
		}
		reason := e.Reason
		if reason == "" {
			reason = fmt.Sprintf("the value is not allowed here (schema keyword %q)", e.SchemaField)
		}
		return []problem{{where: where, field: field, value: shorten(e.Value), reason: reason}}
	}
	var schemaErr *openapi3.SchemaError
	if errors.As(err, &schemaErr) {
		return describeIn(where, schemaErr)
	}
	return []problem{{where: where, reason: err.Error()}}
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + " " + b
}

func shorten(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	const limit = 200
	if len(data) > limit {
		return string(data[:limit]) + "…"
	}
	return string(data)
}
