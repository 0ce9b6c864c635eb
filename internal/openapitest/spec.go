// Package openapitest checks HTTP traffic in tests against E2B's published
// OpenAPI specs (testdata/e2b-openapi.yml and testdata/envd-openapi.yml,
// embedded in the package so that a test of any package finds them), so that both ends of our wire traffic hold to E2B's contract and not only
// to our reading of it. Transport validates what a client sends and receives;
// Middleware validates what a server receives and answers. A mismatch fails
// the test that caused it, naming the operation, the field and the value.
//
// A client test sends its calls through the validating transport:
//
//	hc := &http.Client{Transport: openapitest.E2B(t).Transport(t, srv.URL, nil)}
//
// A server test wraps its handler, naming what is not API traffic:
//
//	h := openapitest.E2B(t).Middleware(t, handler,
//		openapitest.SkipRequests(openapitest.IsSandboxTraffic),
//		openapitest.SkipRequests(isUploadPath))
//
// Status codes must be declared for the operation (a default response
// counts); bodies, required fields, enums and formats (including uuid) are
// checked. A request without credentials is accepted only when it is
// answered 401. The only exceptions to the snapshots are the allowlists
// (e2bAllowlist, envdAllowlist), one entry per thing E2B does beyond them.
package openapitest

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Spec is one loaded OpenAPI document and the router over its operations.
type Spec struct {
	name   string
	doc    *openapi3.T
	router routers.Router
}

// Name is the fixture file the spec was loaded from.
func (s *Spec) Name() string { return s.name }

// Document is the loaded document, including the allowlist's additions.
func (s *Spec) Document() *openapi3.T { return s.doc }

type loaded struct {
	once sync.Once
	spec *Spec
	err  error
}

var e2bSpec, envdSpec loaded

// E2B returns the control-plane spec (e2b-openapi.yml) with e2bAllowlist
// applied, loading it once per test binary. A spec that does not load or
// validate fails tb.
func E2B(tb testing.TB) *Spec {
	tb.Helper()
	return e2bSpec.get(tb, "e2b-openapi.yml", e2bAllowlist)
}

// Envd returns envd's HTTP spec (envd-openapi.yml) with envdAllowlist
// applied, loading it once.
func Envd(tb testing.TB) *Spec {
	tb.Helper()
	return envdSpec.get(tb, "envd-openapi.yml", envdAllowlist)
}

func (l *loaded) get(tb testing.TB, file string, additions []addition) *Spec {
	tb.Helper()
	l.once.Do(func() { l.spec, l.err = load(file, additions) })
	if l.err != nil {
		tb.Fatalf("openapitest: %v", l.err)
	}
	return l.spec
}

// specs holds E2B's OpenAPI specs, unchanged below their provenance header
// (testdata/README.md says where each comes from). Embedding them makes the
// loader independent of the working directory of the test that uses it.
//
//go:embed testdata/*.yml
var specs embed.FS

// loadDocument parses one embedded spec file, without validating it, and
// returns the name errors give it.
func loadDocument(file string) (*openapi3.T, string, error) {
	path := "openapitest/testdata/" + file
	data, err := specs.ReadFile("testdata/" + file)
	if err != nil {
		return nil, path, fmt.Errorf("reading %s: %w", path, err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		return nil, path, fmt.Errorf("loading %s: %w", path, err)
	}
	return doc, path, nil
}

func load(file string, additions []addition) (*Spec, error) {
	doc, path, err := loadDocument(file)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("%s does not validate as OpenAPI: %w", path, err)
	}
	for _, a := range additions {
		if err := a.apply(doc); err != nil {
			return nil, fmt.Errorf("applying the allowlist entry %q to %s: %w", a.what, path, err)
		}
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("%s with its allowlist applied does not validate: %w", path, err)
	}
	// Servers name the production host; requests are matched by path alone
	// (the caller decides what is API traffic: see Transport and SkipRequests).
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("routing the operations of %s: %w", path, err)
	}
	return &Spec{name: file, doc: doc, router: router}, nil
}

// addition is one thing E2B's servers or the official SDK do beyond the
// spec snapshot (design/e2b-api.md "Uncertainties and caveats"): an operation or field added since, or a
// status an operation answers without declaring it. These are the only
// exceptions to the snapshot; each is applied to the loaded document, so
// that traffic using it is still validated: added operations and fields
// against the shape the SDK's bundled types give them, allowlisted statuses
// as error answers (a JSON body must be the spec's Error envelope).
type addition struct {
	what  string
	apply func(doc *openapi3.T) error
}

// e2bAllowlist is the control plane's allowlist. Nothing else bypasses the
// check. The upload PUT to the presigned URL of GET
// /templates/{id}/files/{hash} is not listed because it is no API
// operation: Transport passes requests outside the API base through
// unvalidated, and a server that serves uploads itself names its upload
// path with SkipRequests.
var e2bAllowlist = []addition{
	// SDK 2.51 creates sandboxes with POST /v2/sandboxes (NewSandboxV2): the
	// fields of NewSandbox without `secure` (v2 sandboxes are always secured),
	// timeout default 300 and minimum 1; answers as POST /sandboxes does,
	// plus 429.
	{"POST /v2/sandboxes", addCreateSandboxV2},
	// SDK 2.51 connects with POST /v2/sandboxes/{sandboxID}/connect
	// (ConnectSandboxV2, design/e2b-api.md "Other lifecycle calls" and "Uncertainties and caveats"): POST
	// /sandboxes/{sandboxID}/connect with the body optional and its timeout
	// defaulting to 300.
	{"POST /v2/sandboxes/{sandboxID}/connect", addConnectSandboxV2},
	// SDK 2.51 may send minFreeDiskMb (int32, 0 = no growth) on POST /v3/templates.
	{"TemplateBuildRequestV3.minFreeDiskMb", func(doc *openapi3.T) error {
		return addProperty(doc, "TemplateBuildRequestV3", "minFreeDiskMb",
			openapi3.NewInt32Schema().WithMin(0))
	}},
	// The files link answer may carry headers the upload PUT must send.
	{"TemplateBuildFileUpload.headers", func(doc *openapi3.T) error {
		return addProperty(doc, "TemplateBuildFileUpload", "headers",
			openapi3.NewObjectSchema().WithAdditionalProperties(openapi3.NewStringSchema()))
	}},
	// Registering a build answers 404 for a deleted template (`Template
	// '<id>' has been deleted and cannot be rebuilt`) and 409 when the alias
	// collides with a template ID (design/e2b-api.md "POST /v3/templates").
	{"POST /v3/templates answers 404, 409", allowStatuses(http.MethodPost, "/v3/templates", 404, 409)},
	// Deleting a template answers 400 while running or paused sandboxes use
	// it and, as it accepts an ID or a name, 404 for one that resolves to no
	// template (design/e2b-api.md "Other template endpoints").
	{"DELETE /templates/{templateID} answers 400, 404", allowStatuses(http.MethodDelete, "/templates/{templateID}", 400, 404)},
	// Starting a build answers 400 (invalid body, build ID not a UUID, build
	// not waiting, bad User-Agent version), 403 (template of another team)
	// and 404 (no such template and build) beyond the declared 202/401/500
	// (design/e2b-api.md "start the build" and "Uncertainties and caveats").
	{"POST /v2/templates/{templateID}/builds/{buildID} answers 400, 403, 404",
		allowStatuses(http.MethodPost, "/v2/templates/{templateID}/builds/{buildID}", 400, 403, 404)},
	// Build status answers 400 `Build '<uuid>' not found` for an unknown
	// build (not the declared 404) and 403 for another team's build
	// (design/e2b-api.md "Polling" and "Uncertainties and caveats").
	{"GET /templates/{templateID}/builds/{buildID}/status answers 400, 403",
		allowStatuses(http.MethodGet, "/templates/{templateID}/builds/{buildID}/status", 400, 403)},
	// Creating a sandbox from a template that does not exist answers 404
	// (`{"code":404,"message":"template '<name>' not found"}`) and from
	// another team's template 403, as GET /templates/{id} and the aliases
	// do (design/e2b-api.md "Other template endpoints"); observed from E2B, not in the snapshot.
	{"POST /sandboxes answers 403, 404", allowStatuses(http.MethodPost, "/sandboxes", 403, 404)},
	// As POST /sandboxes; an E2B API from before NewSandboxV2 (design/e2b-api.md
	// "Uncertainties and caveats", version skew) answers 404 for the route itself, on which the
	// client falls back to POST /sandboxes.
	{"POST /v2/sandboxes answers 403, 404", allowStatuses(http.MethodPost, "/v2/sandboxes", 403, 404)},
	// GET /templates/{templateID} answers 404 for an unknown ID and 403 for
	// another team's template (design/e2b-api.md "Other template endpoints").
	{"GET /templates/{templateID} answers 403, 404", allowStatuses(http.MethodGet, "/templates/{templateID}", 403, 404)},
	// An E2B API from before GET /v2/templates answers 404 for the route;
	// the client then lists with GET /templates (design/e2b-api.md "Other template endpoints": the
	// deprecated list the CLI still uses).
	{"GET /v2/templates answers 404", allowStatuses(http.MethodGet, "/v2/templates", 404)},
	// Every operation is reached through E2B's edge, which a client sees and
	// a server does not write: so this entry holds for Transport only. The
	// edge answers 429 when a client is rate limited (the SDK maps it to
	// RateLimitError, design/e2b-api.md "Control-plane conventions"), 502/503/504 from its load balancer
	// when the API behind it is down or slow, and redirects (which the
	// client must not follow to another host: safehttp); error answers may
	// have an empty or non-JSON body ("clients must key off the status
	// code", design/e2b-api.md "Error body"). The client's fault-injection tests rely on this entry.
	// Applied last, so that it covers the operations added above.
	{"through E2B's edge every operation answers 3xx, 429, 502, 503, 504, and errors without the JSON envelope",
		allowEdgeAnswers(429, 502, 503, 504)},
}

// envdAllowlist is envd's allowlist. Nothing else bypasses the check.
var envdAllowlist = []addition{
	// envd's access-token check runs before every handler but /health and
	// answers 401 (design/e2b-api.md "Addressing envd", "envd plain HTTP endpoints"); the snapshot declares 401 only
	// on the /files operations. (The Connect procedures answer it too, but
	// they are no operations of this spec.)
	{"GET /envs answers 401", allowStatuses(http.MethodGet, "/envs", 401)},
	// /init refuses a body without the token set before, or with another,
	// with 401 and envd's message as plain text (design/envd.md "HTTP files").
	{"POST /init answers 401", allowStatuses(http.MethodPost, "/init", 401)},
	{"GET /metrics answers 401", allowStatuses(http.MethodGet, "/metrics", 401)},
	// Downloads honour Range requests with 206 Partial Content (design/e2b-api.md
	// "envd plain HTTP endpoints": "ranges/conditionals with identity").
	{"GET /files answers 206", allowStatuses(http.MethodGet, "/files", 206)},
	// A download is typed by the file's extension (or, without one, by what
	// net/http sniffs), not always application/octet-stream (design/envd.md).
	{"GET /files answers 200 with any media type", allowAnyMediaType(http.MethodGet, "/files", 200)},
	// envd writes an upload's JSON answer without a Content-Type, so net/http
	// sniffs it as text/plain; charset=utf-8 (design/envd.md).
	{"POST /files answers 200 as text/plain", allowJSONTypedAs(http.MethodPost, "/files", 200, "text/plain; charset=utf-8")},
}

// allowlistedStatus marks the responses an allowlist entry added, which
// Middleware and Transport check as error answers: a JSON body must be the
// spec's Error envelope; an empty or non-JSON body (the bytes of a partial
// download) is not checked.
const allowlistedStatus = "x-openapitest-allowlisted"

// edgeAnswer marks what allowEdgeAnswers allows, for Transport only: on a
// response it added, edgeAdded; on an error response the spec declares,
// edgeDeclared (checked as declared unless its body is empty or not JSON).
const (
	edgeAnswer   = "x-openapitest-edge"
	edgeAdded    = "added"
	edgeDeclared = "declared"
)

// allowStatuses lets one operation answer statuses its spec does not declare.
func allowStatuses(method, path string, statuses ...int) func(doc *openapi3.T) error {
	return func(doc *openapi3.T) error {
		item := doc.Paths.Value(path)
		if item == nil || item.GetOperation(method) == nil {
			return fmt.Errorf("operation %s %s is missing", method, path)
		}
		op := item.GetOperation(method)
		for _, status := range statuses {
			if op.Responses.Status(status) != nil {
				return fmt.Errorf("%s %s already declares %d: the allowlist entry is obsolete", method, path, status)
			}
			op.Responses.Set(strconv.Itoa(status), allowlistedResponse(allowlistedStatus, true))
		}
		return nil
	}
}

// allowAnyMediaType lets one answer of one operation have any Content-Type,
// its body as the declared one.
func allowAnyMediaType(method, path string, status int) func(doc *openapi3.T) error {
	return func(doc *openapi3.T) error {
		item := doc.Paths.Value(path)
		if item == nil || item.GetOperation(method) == nil {
			return fmt.Errorf("operation %s %s is missing", method, path)
		}
		resp := item.GetOperation(method).Responses.Status(status)
		if resp == nil || resp.Value == nil || len(resp.Value.Content) != 1 {
			return fmt.Errorf("%s %s does not declare %d with one media type", method, path, status)
		}
		if resp.Value.Content.Get("*/*") != nil {
			return fmt.Errorf("%s %s already answers %d with any media type: the allowlist entry is obsolete", method, path, status)
		}
		for _, media := range resp.Value.Content {
			resp.Value.Content["*/*"] = media
		}
		return nil
	}
}

// jsonTypedAs marks a JSON answer sent under another Content-Type (the
// value): its body is checked as the declared JSON.
const jsonTypedAs = "x-openapitest-json-typed-as"

// allowJSONTypedAs lets one JSON answer of one operation carry contentType.
func allowJSONTypedAs(method, path string, status int, contentType string) func(doc *openapi3.T) error {
	return func(doc *openapi3.T) error {
		item := doc.Paths.Value(path)
		if item == nil || item.GetOperation(method) == nil {
			return fmt.Errorf("operation %s %s is missing", method, path)
		}
		resp := item.GetOperation(method).Responses.Status(status)
		if resp == nil || resp.Value == nil || resp.Value.Content.Get("application/json") == nil {
			return fmt.Errorf("%s %s does not declare %d as JSON", method, path, status)
		}
		if resp.Value.Content.Get(contentType) != nil {
			return fmt.Errorf("%s %s already answers %d as %s: the allowlist entry is obsolete", method, path, status, contentType)
		}
		if resp.Value.Extensions == nil {
			resp.Value.Extensions = map[string]any{}
		}
		resp.Value.Extensions[jsonTypedAs] = contentType
		return nil
	}
}

// allowEdgeAnswers marks, on every operation, the statuses the edge may
// answer that the operation does not declare, and the error statuses it
// declares (whose bodies the edge may replace). Redirects need no mark:
// every 3xx is an edge answer.
func allowEdgeAnswers(statuses ...int) func(doc *openapi3.T) error {
	return func(doc *openapi3.T) error {
		for _, item := range doc.Paths.Map() {
			for _, op := range item.Operations() {
				for code, resp := range op.Responses.Map() {
					if resp.Value != nil && len(code) == 3 && (code[0] == '4' || code[0] == '5') && resp.Value.Extensions[allowlistedStatus] == nil {
						if resp.Value.Extensions == nil {
							resp.Value.Extensions = map[string]any{}
						}
						resp.Value.Extensions[edgeAnswer] = edgeDeclared
					}
				}
				for _, status := range statuses {
					if op.Responses.Status(status) == nil {
						op.Responses.Set(strconv.Itoa(status), allowlistedResponse(edgeAnswer, edgeAdded))
					}
				}
			}
		}
		return nil
	}
}

func allowlistedResponse(mark string, value any) *openapi3.ResponseRef {
	resp := openapi3.NewResponse().WithDescription("allowlisted by openapitest")
	resp.Extensions = map[string]any{mark: value}
	return &openapi3.ResponseRef{Value: resp}
}

func addProperty(doc *openapi3.T, schemaName, property string, schema *openapi3.Schema) error {
	ref := doc.Components.Schemas[schemaName]
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("schema %s is missing", schemaName)
	}
	if _, exists := ref.Value.Properties[property]; exists {
		return fmt.Errorf("schema %s already has %s: the allowlist entry is obsolete", schemaName, property)
	}
	ref.Value.Properties[property] = openapi3.NewSchemaRef("", schema)
	return nil
}

func addConnectSandboxV2(doc *openapi3.T) error {
	const v2Path = "/v2/sandboxes/{sandboxID}/connect"
	v1Item := doc.Paths.Value("/sandboxes/{sandboxID}/connect")
	if v1Item == nil || v1Item.Post == nil {
		return errors.New("POST /sandboxes/{sandboxID}/connect is missing")
	}
	if doc.Paths.Value(v2Path) != nil {
		return fmt.Errorf("%s is in the spec: the allowlist entry is obsolete", v2Path)
	}
	connect := doc.Components.Schemas["ConnectSandbox"]
	if connect == nil || connect.Value == nil {
		return errors.New("schema ConnectSandbox is missing")
	}
	v2 := *connect.Value
	v2.Required = nil
	v2.Properties = make(openapi3.Schemas, len(connect.Value.Properties))
	for name, prop := range connect.Value.Properties {
		v2.Properties[name] = prop
	}
	v2.Properties["timeout"] = openapi3.NewSchemaRef("", openapi3.NewInt32Schema().WithMin(0).WithDefault(300))
	op := *v1Item.Post
	op.OperationID = "postSandboxesSandboxIDConnectV2"
	op.RequestBody = &openapi3.RequestBodyRef{Value: openapi3.NewRequestBody().WithRequired(false).
		WithJSONSchemaRef(openapi3.NewSchemaRef("", &v2))}
	doc.Paths.Set(v2Path, &openapi3.PathItem{Parameters: v1Item.Parameters, Post: &op})
	return nil
}

func addCreateSandboxV2(doc *openapi3.T) error {
	v1Item := doc.Paths.Value("/sandboxes")
	v2Item := doc.Paths.Value("/v2/sandboxes")
	if v1Item == nil || v1Item.Post == nil || v2Item == nil {
		return errors.New("POST /sandboxes or the /v2/sandboxes path is missing")
	}
	if v2Item.Post != nil {
		return errors.New("POST /v2/sandboxes is in the spec: the allowlist entry is obsolete")
	}
	newSandbox := doc.Components.Schemas["NewSandbox"]
	if newSandbox == nil || newSandbox.Value == nil {
		return errors.New("schema NewSandbox is missing")
	}
	v2 := *newSandbox.Value
	v2.Properties = make(openapi3.Schemas, len(newSandbox.Value.Properties))
	for name, prop := range newSandbox.Value.Properties {
		v2.Properties[name] = prop
	}
	// `secure` does not exist on v2: the negation of a schema that matches
	// every value (nullable, nothing else) rejects it by name when present.
	v2.Properties["secure"] = openapi3.NewSchemaRef("", &openapi3.Schema{Not: openapi3.NewSchemaRef("", &openapi3.Schema{Nullable: true})})
	v2.Properties["timeout"] = openapi3.NewSchemaRef("", openapi3.NewInt32Schema().WithMin(1).WithDefault(300))

	op := *v1Item.Post
	op.OperationID = "postSandboxesV2"
	op.RequestBody = &openapi3.RequestBodyRef{Value: openapi3.NewRequestBody().WithRequired(true).
		WithJSONSchemaRef(openapi3.NewSchemaRef("", &v2))}
	op.Responses = openapi3.NewResponses()
	for code, resp := range v1Item.Post.Responses.Map() {
		op.Responses.Set(code, resp)
	}
	tooMany := doc.Components.Responses["429"]
	if tooMany == nil {
		return errors.New("response 429 is missing from components")
	}
	op.Responses.Set("429", &openapi3.ResponseRef{Ref: "#/components/responses/429", Value: tooMany.Value})
	v2Item.Post = &op
	return nil
}
