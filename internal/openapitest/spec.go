// Package openapitest checks HTTP traffic in tests against E2B's published
// OpenAPI specs (../shared/fixtures/e2b-openapi.yml and envd-openapi.yml),
// so that both ends of our wire traffic hold to E2B's contract and not only
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
// answered 401. A fault-injection test that answers with a status the
// operation does not declare says so with InjectedFaults.
package openapitest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// Document is the loaded document, including the allowlisted additions.
func (s *Spec) Document() *openapi3.T { return s.doc }

type loaded struct {
	once sync.Once
	spec *Spec
	err  error
}

var e2bSpec, envdSpec loaded

// E2B returns the control-plane spec (e2b-openapi.yml) with the allowlisted
// additions applied, loading it once per test binary. A spec that does not
// load or validate fails tb.
func E2B(tb testing.TB) *Spec {
	tb.Helper()
	return e2bSpec.get(tb, "e2b-openapi.yml", e2bAdditions)
}

// Envd returns envd's HTTP spec (envd-openapi.yml), loading it once.
func Envd(tb testing.TB) *Spec {
	tb.Helper()
	return envdSpec.get(tb, "envd-openapi.yml", nil)
}

func (l *loaded) get(tb testing.TB, file string, additions []addition) *Spec {
	tb.Helper()
	l.once.Do(func() { l.spec, l.err = load(file, additions) })
	if l.err != nil {
		tb.Fatalf("openapitest: %v", l.err)
	}
	return l.spec
}

// FixturesDir finds the shared fixtures: walking up from the working
// directory (a test runs in its package directory), the first directory that
// holds shared/fixtures. The repository is cloned beside shared/, so from
// <repo>/internal/pkg this finds <repo>/../shared/fixtures.
func FixturesDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the shared fixtures: %w", err)
	}
	for dir := wd; ; {
		candidate := filepath.Join(dir, "shared", "fixtures")
		if _, err := os.Stat(filepath.Join(candidate, "e2b-openapi.yml")); err == nil {
			return candidate, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no shared/fixtures/e2b-openapi.yml in %s or any directory above it", wd)
		}
		dir = parent
	}
}

func load(file string, additions []addition) (*Spec, error) {
	dir, err := FixturesDir()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, file)
	doc, err := openapi3.NewLoader().LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", path, err)
	}
	ctx := context.Background()
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("%s does not validate as OpenAPI: %w", path, err)
	}
	for _, a := range additions {
		if err := a.apply(doc); err != nil {
			return nil, fmt.Errorf("applying the allowlisted addition %q to %s: %w", a.what, path, err)
		}
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("%s with the allowlisted additions does not validate: %w", path, err)
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

// addition is one thing E2B added after the spec snapshot that the official
// SDK already uses (e2b-api.md §8). These are the only exceptions to the
// snapshot; each is applied to the loaded document so that traffic using it
// is still validated, against the shape the SDK's bundled types give it.
type addition struct {
	what  string
	apply func(doc *openapi3.T) error
}

// e2bAdditions is the allowlist. Nothing else bypasses the check. The upload
// PUT to the presigned URL of GET /templates/{id}/files/{hash} is not listed
// because it is no API operation: Transport passes requests outside the API
// base through unvalidated, and a server that serves uploads itself names its
// upload path with SkipRequests.
var e2bAdditions = []addition{
	// SDK 2.51 creates sandboxes with POST /v2/sandboxes (NewSandboxV2): the
	// fields of NewSandbox without `secure` (v2 sandboxes are always secured),
	// timeout default 300 and minimum 1; answers as POST /sandboxes does,
	// plus 429.
	{"POST /v2/sandboxes", addCreateSandboxV2},
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
