package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/list"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

// The provider's tests and the helpers of every test of the package: Terraform
// CLI tests, named TestAcc<Resource>_<case> as in the HashiCorp providers, run
// with terraform-plugin-testing against the provider served in process; those
// that need the API use the shared local server (internal/acctest).

func TestMain(m *testing.M) {
	code := m.Run()
	if err := acctest.StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = max(code, 1)
	}
	os.Exit(code)
}

// envVars are the provider's environment variables; acceptance tests clear
// them so that a developer's shell does not change their outcome.
var envVars = []string{EnvAPIKey, EnvDomain, EnvAPIURL, EnvSandboxURL}

// protoV6Factories serves p in-process to the Terraform CLI that
// terraform-plugin-testing runs, under the name "e2b".
func protoV6Factories(p provider.Provider) map[string]func() (tfprotov6.ProviderServer, error) {
	return map[string]func() (tfprotov6.ProviderServer, error){
		"e2b": providerserver.NewProtocol6WithError(p),
	}
}

// factories serve the provider itself.
func factories() map[string]func() (tfprotov6.ProviderServer, error) {
	return protoV6Factories(New("test")())
}

// accPreCheck prepares a Terraform CLI test: it skips it without TF_ACC, as
// terraform-plugin-testing's Test does, so that `go test` alone runs the unit
// tests; it clears the provider's environment variables and makes sure
// terraform-plugin-testing will find a Terraform CLI without trying to download
// one, from TF_ACC_TERRAFORM_PATH (set by scripts/test.sh) or PATH; a missing CLI
// is a missing prerequisite.
func accPreCheck(t *testing.T) {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Skip("an acceptance test: it runs a Terraform CLI with TF_ACC=1")
	}
	for _, v := range envVars {
		t.Setenv(v, "")
	}
	if p := os.Getenv("TF_ACC_TERRAFORM_PATH"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("TF_ACC_TERRAFORM_PATH: %v", err)
		}
		return
	}
	if _, err := exec.LookPath("terraform"); err == nil {
		return
	}
	testutil.Missing(t, "no Terraform CLI: set TF_ACC_TERRAFORM_PATH or put terraform on PATH (scripts/test.sh does)")
}

// planWarnings serves the provider and keeps the warnings its resource plans answered
// Terraform, for checks terraform-plugin-testing has none of: the CLI prints warnings but
// the plan JSON that plan checks see does not carry them.
type planWarnings struct {
	mu   sync.Mutex
	seen []string // "<resource type>: <summary>"
}

// factories serve the provider through w.
func (w *planWarnings) factories() map[string]func() (tfprotov6.ProviderServer, error) {
	serve := providerserver.NewProtocol6WithError(New("test")())
	return map[string]func() (tfprotov6.ProviderServer, error){
		"e2b": func() (tfprotov6.ProviderServer, error) {
			s, err := serve()
			return warningServer{ProviderServer: s, w: w}, err
		},
	}
}

func (w *planWarnings) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = nil
}

// only is a plan check that the plans since the last reset warned exactly once, with
// summary on a resource of resourceType.
func (w *planWarnings) only(resourceType, summary string) plancheck.PlanCheck {
	return planCheck(func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if want := resourceType + ": " + summary; len(w.seen) != 1 || w.seen[0] != want {
			return fmt.Errorf("plan warnings %q, want only %q", w.seen, want)
		}
		return nil
	})
}

// none is a state check that no plan warned since the last reset.
func (w *planWarnings) none() serverCheck {
	return func(context.Context) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.seen) != 0 {
			return fmt.Errorf("plan warnings %q, want none", w.seen)
		}
		return nil
	}
}

type warningServer struct {
	tfprotov6.ProviderServer
	w *planWarnings
}

func (s warningServer) PlanResourceChange(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	resp, err := s.ProviderServer.PlanResourceChange(ctx, req)
	if resp != nil {
		s.w.mu.Lock()
		for _, d := range resp.Diagnostics {
			if d.Severity == tfprotov6.DiagnosticSeverityWarning {
				s.w.seen = append(s.w.seen, req.TypeName+": "+d.Summary)
			}
		}
		s.w.mu.Unlock()
	}
	return resp, err
}

// planCheck is a plan check by a function.
type planCheck func() error

func (c planCheck) CheckPlan(_ context.Context, _ plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	resp.Error = c()
}

// localServer prepares an acceptance test against the shared local server,
// skipping it (with the reason) where Docker or TF_ACC are missing.
func localServer(t *testing.T) *acctest.Server {
	t.Helper()
	accPreCheck(t)
	return acctest.Shared(t)
}

// servedProvider is the provider served over tfprotov6 in process, with its schemas and
// identity schemas, for tests that call it as a CLI does.
type servedProvider struct {
	tfprotov6.ProviderServer
	schemas    *tfprotov6.GetProviderSchemaResponse
	identities *tfprotov6.GetResourceIdentitySchemasResponse
}

// configuredServer serves the provider configured for srv.
func configuredServer(t *testing.T, ctx context.Context, srv *acctest.Server) *servedProvider {
	t.Helper()
	server, err := providerserver.NewProtocol6WithError(New("test")())()
	acctest.Must(t, err)
	s := &servedProvider{ProviderServer: server}
	s.schemas, err = server.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	acctest.Must(t, err)
	s.identities, err = server.GetResourceIdentitySchemas(ctx, &tfprotov6.GetResourceIdentitySchemasRequest{})
	acctest.Must(t, err)
	config := dynamicValue(t, s.schemas.Provider.ValueType(), map[string]tftypes.Value{
		"api_url":     tftypes.NewValue(tftypes.String, srv.APIURL),
		"api_key":     tftypes.NewValue(tftypes.String, srv.APIKey),
		"sandbox_url": tftypes.NewValue(tftypes.String, srv.SandboxURL),
	})
	resp, err := server.ConfigureProvider(ctx, &tfprotov6.ConfigureProviderRequest{Config: config})
	acctest.Must(t, err)
	for _, d := range resp.Diagnostics {
		t.Fatalf("configuring the provider: %s: %s", d.Summary, d.Detail)
	}
	return s
}

// testAPI is a client of the local server for checks and for changes made
// "outside Terraform".
func testAPI(t *testing.T, s *acctest.Server) *e2bapi.Client {
	t.Helper()
	c, err := e2bapi.New(e2bapi.Config{BaseURL: s.APIURL, APIKey: s.APIKey, MaxRetries: 2})
	acctest.Must(t, err)
	return c
}

// uniqueName is a template name no other test run uses.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
}

// templateBuild is srv's provider block, a template named name and a build of it
// labelled label from image, with the HCL lines of body (steps and the like).
func templateBuild(srv *acctest.Server, name, label, image, body string) string {
	return srv.ProviderConfig() + fmt.Sprintf(`
resource "e2b_template" "t" {
  name = %q
}

resource "e2b_template_build" %q {
  template_id = e2b_template.t.id
  from_image  = %q
%s
}
`, name, label, image, body)
}

// planProvider configures the provider for plan-only tests: planning a
// create calls no API but the key check of Configure, which a refused
// connection skips (common_plan_checks.go), so the address never has to answer.
const planProvider = `
provider "e2b" {
  api_url = "http://127.0.0.1:9"
  api_key = "e2b_0123456789abcdef"
}
`

const someTemplateID = "abcdefghij0123456789"

// planErrors plans each config (after planProvider) in a test of its own, which
// must fail matching the regular expression.
func planErrors(t *testing.T, cases map[string]struct{ config, err string }) {
	t.Helper()
	accPreCheck(t)
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			tfresource.Test(t, tfresource.TestCase{
				ProtoV6ProviderFactories: factories(),
				Steps: []tfresource.TestStep{{
					Config:      planProvider + c.config,
					PlanOnly:    true,
					ExpectError: regexp.MustCompile(c.err),
				}},
			})
		})
	}
}

// stringValue is a knownvalue.Check of a string attribute by a function; capture
// records values for later steps with it.
type stringValue struct {
	what  string
	check func(string) error
}

func (c stringValue) String() string { return c.what }

func (c stringValue) CheckValue(v any) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("%v is not a string", v)
	}
	return c.check(s)
}

// capture stores the attribute's value in into.
func capture(into *string) knownvalue.Check {
	return stringValue{"captured", func(s string) error { *into = s; return nil }}
}

// serverCheck is a state check of what only the server knows.
type serverCheck func(ctx context.Context) error

func (c serverCheck) CheckState(ctx context.Context, _ statecheck.CheckStateRequest, resp *statecheck.CheckStateResponse) {
	if err := c(ctx); err != nil {
		resp.Error = err
	}
}

func TestResolveProviderData(t *testing.T) {
	type want struct {
		data      *ProviderData
		errAttr   string // attribute the error is reported on
		errText   string // part of the error detail
		warnAttr  string
		noWarning bool
	}
	defaults := ProviderData{
		APIURL:         "https://api.e2b.app",
		Domain:         "e2b.app",
		RequestTimeout: 60 * time.Second,
		MaxRetries:     4,
		Version:        "1.2.3",
	}
	with := func(f func(d *ProviderData)) *ProviderData {
		d := defaults
		f(&d)
		return &d
	}
	null := providerModel{
		APIKey: types.StringNull(), Domain: types.StringNull(), APIURL: types.StringNull(),
		SandboxURL: types.StringNull(), RequestTimeout: types.StringNull(), MaxRetries: types.Int64Null(),
	}
	model := func(f func(m *providerModel)) providerModel {
		m := null
		f(&m)
		return m
	}

	tests := []struct {
		name  string
		model providerModel
		env   map[string]string
		want  want
	}{
		{
			name:  "defaults",
			model: null,
			want:  want{data: &defaults, noWarning: true},
		},
		{
			name:  "environment",
			model: null,
			env: map[string]string{
				EnvAPIKey: "e2b_0123abcdef", EnvDomain: "example.test",
				EnvSandboxURL: "http://127.0.0.1:49983/",
			},
			want: want{data: with(func(d *ProviderData) {
				d.APIKey = "e2b_0123abcdef"
				d.apiKeyFrom = EnvAPIKey
				d.Domain = "example.test"
				d.APIURL = "https://api.example.test"
				d.SandboxURL = "http://127.0.0.1:49983"
			}), noWarning: true},
		},
		{
			name:  "api_url from the environment overrides the domain's",
			model: null,
			env:   map[string]string{EnvDomain: "example.test", EnvAPIURL: "http://localhost:3000/"},
			want: want{data: with(func(d *ProviderData) {
				d.Domain = "example.test"
				d.APIURL = "http://localhost:3000"
			})},
		},
		{
			name: "config wins over the environment",
			model: model(func(m *providerModel) {
				m.APIKey = types.StringValue("e2b_ff")
				m.Domain = types.StringValue("config.test")
				m.APIURL = types.StringValue("https://api.config.test:8443/base")
				m.SandboxURL = types.StringValue("https://envd.config.test")
				m.RequestTimeout = types.StringValue("2m30s")
				m.MaxRetries = types.Int64Value(0)
			}),
			env: map[string]string{
				EnvAPIKey: "e2b_00", EnvDomain: "env.test", EnvAPIURL: "https://api.env.test",
				EnvSandboxURL: "https://envd.env.test",
			},
			want: want{data: &ProviderData{
				APIKey: "e2b_ff", Domain: "config.test", APIURL: "https://api.config.test:8443/base",
				SandboxURL: "https://envd.config.test", RequestTimeout: 150 * time.Second, MaxRetries: 0,
				Version: "1.2.3",
			}},
		},
		{
			name:  "domain from config derives api_url even when E2B_API_URL is unset",
			model: model(func(m *providerModel) { m.Domain = types.StringValue("config.test") }),
			want: want{data: with(func(d *ProviderData) {
				d.Domain = "config.test"
				d.APIURL = "https://api.config.test"
			})},
		},
		{
			name:  "http to a .localhost name is loopback",
			model: model(func(m *providerModel) { m.APIURL = types.StringValue("http://api.localhost:3000/") }),
			want:  want{data: with(func(d *ProviderData) { d.APIURL = "http://api.localhost:3000" })},
		},
		{
			name:  "domain with a port",
			model: model(func(m *providerModel) { m.Domain = types.StringValue("localhost:3000") }),
			want:  want{errAttr: "domain", errText: "without scheme, port or path"},
		},
		{
			name:  "domain with a port from the environment names the variable",
			model: null,
			env:   map[string]string{EnvDomain: "e2b.app:443"},
			want:  want{errAttr: "domain", errText: EnvDomain},
		},
		{
			name:  "the local server's E2B_DOMAIN with a port is not used beside both URLs",
			model: null,
			env:   map[string]string{EnvDomain: "localhost:40037", EnvAPIURL: "http://127.0.0.1:40037", EnvSandboxURL: "http://127.0.0.1:40037"},
			want: want{data: with(func(d *ProviderData) {
				d.Domain = "localhost:40037"
				d.APIURL = "http://127.0.0.1:40037"
				d.SandboxURL = "http://127.0.0.1:40037"
			})},
		},
		{
			name:  "api_url with a query",
			model: model(func(m *providerModel) { m.APIURL = types.StringValue("https://api.e2b.app/?team=x") }),
			want:  want{errAttr: "api_url", errText: "query or fragment"},
		},
		{
			name:  "sandbox_url with a fragment",
			model: model(func(m *providerModel) { m.SandboxURL = types.StringValue("https://envd.example.com#x") }),
			want:  want{errAttr: "sandbox_url", errText: "query or fragment"},
		},
		{
			name:  "IPv6 loopback over http is accepted",
			model: model(func(m *providerModel) { m.APIURL = types.StringValue("http://[::1]:3000") }),
			want:  want{data: with(func(d *ProviderData) { d.APIURL = "http://[::1]:3000" })},
		},
		{
			name:  "unusual api_key is a warning only",
			model: model(func(m *providerModel) { m.APIKey = types.StringValue("sk_e2b_SECRET") }),
			want:  want{data: with(func(d *ProviderData) { d.APIKey = "sk_e2b_SECRET" }), warnAttr: "api_key"},
		},
		{
			name:  "http to a remote host is refused",
			model: model(func(m *providerModel) { m.APIURL = types.StringValue("http://api.example.com") }),
			want:  want{errAttr: "api_url", errText: "clear text"},
		},
		{
			name:  "http to a remote host from the environment names the variable",
			model: null,
			env:   map[string]string{EnvAPIURL: "http://10.0.0.1:3000"},
			want:  want{errAttr: "api_url", errText: EnvAPIURL},
		},
		{
			name:  "relative api_url",
			model: model(func(m *providerModel) { m.APIURL = types.StringValue("api.e2b.app") }),
			want:  want{errAttr: "api_url", errText: "absolute"},
		},
		{
			name:  "api_url with another scheme",
			model: model(func(m *providerModel) { m.APIURL = types.StringValue("ftp://api.e2b.app") }),
			want:  want{errAttr: "api_url", errText: "absolute"},
		},
		{
			name:  "api_url with credentials does not echo them",
			model: model(func(m *providerModel) { m.APIURL = types.StringValue("https://me:hunter2@api.e2b.app") }),
			want:  want{errAttr: "api_url", errText: "REDACTED"},
		},
		{
			name:  "sandbox_url to a remote host over http",
			model: model(func(m *providerModel) { m.SandboxURL = types.StringValue("http://sandbox.example.com") }),
			want:  want{errAttr: "sandbox_url", errText: "clear text"},
		},
		{
			name:  "domain with a scheme",
			model: model(func(m *providerModel) { m.Domain = types.StringValue("https://e2b.app") }),
			want:  want{errAttr: "domain", errText: "without scheme"},
		},
		{
			name:  "empty domain",
			model: model(func(m *providerModel) { m.Domain = types.StringValue("") }),
			want:  want{errAttr: "domain", errText: "empty"},
		},
		{
			name:  "unparseable request_timeout",
			model: model(func(m *providerModel) { m.RequestTimeout = types.StringValue("60") }),
			want:  want{errAttr: "request_timeout", errText: "not a duration"},
		},
		{
			name:  "zero request_timeout",
			model: model(func(m *providerModel) { m.RequestTimeout = types.StringValue("0s") }),
			want:  want{errAttr: "request_timeout", errText: "must be from 1s to 24h"},
		},
		{
			name:  "negative max_retries",
			model: model(func(m *providerModel) { m.MaxRetries = types.Int64Value(-1) }),
			want:  want{errAttr: "max_retries", errText: "from 0 to 100"},
		},
		{
			name:  "too many max_retries",
			model: model(func(m *providerModel) { m.MaxRetries = types.Int64Value(101) }),
			want:  want{errAttr: "max_retries", errText: "from 0 to 100"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string { return tc.env[k] }
			data, diags := resolveProviderData(tc.model, getenv, "1.2.3")
			if tc.want.errAttr != "" {
				if data != nil {
					t.Errorf("got data %+v along with an error", data)
				}
				found := false
				for _, d := range diags.Errors() {
					withPath, ok := d.(interface{ Path() path.Path })
					if ok && withPath.Path().Equal(path.Root(tc.want.errAttr)) && strings.Contains(d.Detail(), tc.want.errText) {
						found = true
					}
					if strings.Contains(d.Detail(), "hunter2") {
						t.Errorf("error repeats the password: %s", d.Detail())
					}
				}
				if !found {
					t.Fatalf("want an error on %s containing %q, got %v", tc.want.errAttr, tc.want.errText, diags)
				}
				return
			}
			if diags.HasError() {
				t.Fatalf("unexpected errors: %v", diags)
			}
			if *data != *tc.want.data {
				t.Errorf("got  %+v\nwant %+v", *data, *tc.want.data)
			}
			if tc.want.noWarning && diags.WarningsCount() != 0 {
				t.Errorf("unexpected warnings: %v", diags)
			}
			if tc.want.warnAttr != "" {
				if diags.WarningsCount() != 1 {
					t.Fatalf("want one warning on %s, got %v", tc.want.warnAttr, diags)
				}
				w, ok := diags.Warnings()[0].(interface{ Path() path.Path })
				if !ok || !w.Path().Equal(path.Root(tc.want.warnAttr)) {
					t.Errorf("warning not on %s: %v", tc.want.warnAttr, diags)
				}
			}
		})
	}
}

func TestRequireAPIKey(t *testing.T) {
	if err := (&ProviderData{}).RequireAPIKey(); !errors.Is(err, ErrMissingAPIKey) {
		t.Errorf("empty key: got %v, want ErrMissingAPIKey", err)
	}
	if !strings.Contains(ErrMissingAPIKey.Error(), "api_key") || !strings.Contains(ErrMissingAPIKey.Error(), EnvAPIKey) {
		t.Errorf("message does not say how to set the key: %q", ErrMissingAPIKey)
	}
	if err := (&ProviderData{APIKey: "e2b_00"}).RequireAPIKey(); err != nil {
		t.Errorf("set key: got %v", err)
	}
}

// probeProvider is the provider with one extra resource, e2b_provider_data,
// whose attributes show the ProviderData its resources receive. It lets the
// acceptance tests observe the configuration through the real Terraform CLI
// before the provider has resources of its own.
type probeProvider struct {
	*e2bProvider
}

func (p probeProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{func() resource.Resource { return &providerDataProbe{} }}
}

// ListResources is none: a list resource needs its resource, which the probe replaces.
func (p probeProvider) ListResources(context.Context) []func() list.ListResource { return nil }

type providerDataProbe struct {
	data *ProviderData
}

type providerDataProbeModel struct {
	ID             types.String `tfsdk:"id"`
	APIURL         types.String `tfsdk:"api_url"`
	APIKey         types.String `tfsdk:"api_key"`
	Domain         types.String `tfsdk:"domain"`
	SandboxURL     types.String `tfsdk:"sandbox_url"`
	RequestTimeout types.String `tfsdk:"request_timeout"`
	MaxRetries     types.Int64  `tfsdk:"max_retries"`
}

func (r *providerDataProbe) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_provider_data"
}

func (r *providerDataProbe) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	computed := func() schema.StringAttribute { return schema.StringAttribute{Computed: true} }
	resp.Schema = schema.Schema{Attributes: map[string]schema.Attribute{
		"id": computed(), "api_url": computed(), "api_key": computed(), "domain": computed(),
		"sandbox_url": computed(), "request_timeout": computed(),
		"max_retries": schema.Int64Attribute{Computed: true},
	}}
}

func (r *providerDataProbe) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if req.ProviderData == nil {
		return
	}
	data, ok := req.ProviderData.(*ProviderData)
	if !ok {
		resp.Diagnostics.AddError("Unexpected provider data", fmt.Sprintf("got %T, want *ProviderData", req.ProviderData))
		return
	}
	r.data = data
}

func (r *providerDataProbe) Create(ctx context.Context, _ resource.CreateRequest, resp *resource.CreateResponse) {
	if r.data == nil {
		resp.Diagnostics.AddError("Provider not configured", "Create ran without provider data")
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, providerDataProbeModel{
		ID:             types.StringValue("probe"),
		APIURL:         types.StringValue(r.data.APIURL),
		APIKey:         types.StringValue(r.data.APIKey),
		Domain:         types.StringValue(r.data.Domain),
		SandboxURL:     types.StringValue(r.data.SandboxURL),
		RequestTimeout: types.StringValue(r.data.RequestTimeout.String()),
		MaxRetries:     types.Int64Value(int64(r.data.MaxRetries)),
	})...)
}

func (r *providerDataProbe) Read(context.Context, resource.ReadRequest, *resource.ReadResponse) {}

func (r *providerDataProbe) Update(context.Context, resource.UpdateRequest, *resource.UpdateResponse) {
}

func (r *providerDataProbe) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {
}

// TestAccProvider_unknownConfiguration runs the Terraform CLI against the provider:
// values unknown at plan time (here the output of terraform_data, which is
// created in the same apply) must not break validation or planning, and
// must be resolved once known.
func TestAccProvider_unknownConfiguration(t *testing.T) {
	accPreCheck(t)
	t.Setenv(EnvDomain, "env.example.test")
	t.Setenv(EnvSandboxURL, "http://127.0.0.1:49983")
	// Loopback that refuses: the key check Configure makes once the key is known
	// reaches no name resolver and is skipped (common_plan_checks.go).
	t.Setenv(EnvAPIURL, "http://127.0.0.1:9")

	const config = `
resource "terraform_data" "later" {
  input = {
    key     = "e2b_0123456789abcdef"
    timeout = "90s"
  }
}

provider "e2b" {
  api_key         = terraform_data.later.output.key
  request_timeout = terraform_data.later.output.timeout
  max_retries     = 2
}

resource "e2b_provider_data" "probe" {}
`
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: protoV6Factories(probeProvider{&e2bProvider{version: "test"}}),
		Steps: []tfresource.TestStep{
			{
				// Validation and plan only, with the values still unknown.
				Config:             config,
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("e2b_provider_data.probe", tfjsonpath.New("api_key"), knownvalue.StringExact("e2b_0123456789abcdef")),
					statecheck.ExpectKnownValue("e2b_provider_data.probe", tfjsonpath.New("request_timeout"), knownvalue.StringExact("1m30s")),
					statecheck.ExpectKnownValue("e2b_provider_data.probe", tfjsonpath.New("max_retries"), knownvalue.Int64Exact(2)),
					statecheck.ExpectKnownValue("e2b_provider_data.probe", tfjsonpath.New("domain"), knownvalue.StringExact("env.example.test")),
					statecheck.ExpectKnownValue("e2b_provider_data.probe", tfjsonpath.New("api_url"), knownvalue.StringExact("http://127.0.0.1:9")),
					statecheck.ExpectKnownValue("e2b_provider_data.probe", tfjsonpath.New("sandbox_url"), knownvalue.StringExact("http://127.0.0.1:49983")),
				},
			},
		},
	})
}

// TestAccProvider_configurationErrors checks that bad values are reported by
// the CLI with the attribute's name, both when written in the configuration
// (found by validation) and when they become known only during apply.
func TestAccProvider_configurationErrors(t *testing.T) {
	accPreCheck(t)
	factories := protoV6Factories(probeProvider{&e2bProvider{version: "test"}})

	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []tfresource.TestStep{{
			Config: `
provider "e2b" {
  api_url = "http://api.example.com"
}

resource "e2b_provider_data" "probe" {}
`,
			ExpectError: regexp.MustCompile(`(?s)Invalid api_url.*clear text`),
		}},
	})

	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []tfresource.TestStep{{
			Config: `
resource "terraform_data" "later" {
  input = "ftp://api.example.com"
}

provider "e2b" {
  api_url = terraform_data.later.output
}

resource "e2b_provider_data" "probe" {}
`,
			ExpectError: regexp.MustCompile(`(?s)Invalid api_url.*ftp://api.example.com`),
		}},
	})
}

// TestAccProvider_configurationRules plans with each kind of provider argument that the
// credential rule (package safehttp) decides: what validation refuses names the argument,
// and what it accepts plans.
func TestAccProvider_configurationRules(t *testing.T) {
	accPreCheck(t)
	for name, c := range map[string]struct{ block, err string }{
		"http to localhost":              {`api_url = "http://localhost:3000"`, ""},
		"http to a .localhost name":      {`api_url = "http://api.localhost:3000"`, ""},
		"http sandbox_url to .localhost": {`sandbox_url = "http://sandbox.localhost:49983"`, ""},
		"http to a remote host":          {`api_url = "http://api.example.com"`, `(?s)Invalid\s+api_url.*clear\s+text`},
		"api_url with a query":           {`api_url = "https://api.e2b.app/?team=x"`, `(?s)Invalid\s+api_url.*query\s+or\s+fragment`},
		"api_url with a fragment":        {`api_url = "https://api.e2b.app#x"`, `(?s)Invalid\s+api_url.*query\s+or\s+fragment`},
		"sandbox_url with a query":       {`sandbox_url = "https://envd.example.com?token=x"`, `(?s)Invalid\s+sandbox_url.*query\s+or\s+fragment`},
		"api_url with credentials":       {`api_url = "https://me:hunter2@api.e2b.app"`, `(?s)Invalid\s+api_url.*REDACTED`},
		"domain with a port":             {`domain = "e2b.app:443"`, `(?s)Invalid\s+domain.*without\s+scheme,\s+port\s+or\s+path`},
		"domain with a scheme":           {`domain = "https://e2b.app"`, `(?s)Invalid\s+domain.*bare\s+DNS\s+name`},
		"zero request_timeout":           {`request_timeout = "0s"`, `(?s)Invalid\s+request_timeout.*out\s+of\s+range.*from\s+1s\s+to\s+24h`},
		"too many max_retries":           {`max_retries = 101`, `(?s)Invalid\s+max_retries.*max_retries\s+is\s+101;\s+it\s+must\s+be\s+from\s+0\s+to\s+100`},
	} {
		t.Run(name, func(t *testing.T) {
			step := tfresource.TestStep{
				Config:   "provider \"e2b\" {\n  " + c.block + "\n}\n\nresource \"e2b_provider_data\" \"probe\" {}\n",
				PlanOnly: true,
			}
			if c.err != "" {
				step.ExpectError = regexp.MustCompile(c.err)
			} else {
				step.ExpectNonEmptyPlan = true
			}
			tfresource.Test(t, tfresource.TestCase{
				ProtoV6ProviderFactories: protoV6Factories(probeProvider{&e2bProvider{version: "test"}}),
				Steps:                    []tfresource.TestStep{step},
			})
		})
	}
}

// TestAccProvider_localServerEnvironment configures the provider as the local-server guide
// does: from the lines the server prints (E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN,
// E2B_API_KEY), with the printed domain also written in the provider block, whose
// validator checks it always. A template is created through it.
func TestAccProvider_localServerEnvironment(t *testing.T) {
	srv := localServer(t)
	printed := map[string]string{}
	for line := range strings.Lines(srv.Log()) {
		if key, value, ok := strings.Cut(strings.TrimSpace(line), "="); ok && strings.HasPrefix(key, "E2B_") && !strings.Contains(key, " ") {
			printed[key] = value
		}
	}
	for _, key := range []string{EnvAPIURL, EnvSandboxURL, EnvDomain, EnvAPIKey} {
		if printed[key] == "" {
			t.Fatalf("the server printed no %s line:\n%s", key, srv.Log())
		}
		t.Setenv(key, printed[key])
	}
	name := uniqueName("acc-printed-env")
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{{
			Config: fmt.Sprintf(`
provider "e2b" {
  domain = %q
}

resource "e2b_template" "t" {
  name = %q
}
`, printed[EnvDomain], name),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("e2b_template.t", tfjsonpath.New("name"), knownvalue.StringExact(name)),
			},
		}},
	})
}
