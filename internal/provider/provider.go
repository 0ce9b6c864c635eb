// Package provider is the Terraform glue of terraform-provider-e2b: the
// provider configuration here, one file per resource, data source and
// ephemeral resource (schema, model, CRUD) with the files of its parts beside
// it under its name (template_build_*.go: its schema, its spec for package
// templatebuild, its plan, run and import), what several of them share in
// common_*.go, and the attribute validators in validators.go.
// The use cases themselves are packages templatebuild and sandboxrun
// (DESIGN.md).
package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/function"
	"github.com/hashicorp/terraform-plugin-framework/list"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/safehttp"
)

// Defaults and environment variables of the provider configuration. The
// variable names are the E2B SDK's, so a shell set up for the SDK works here.
const (
	DefaultDomain         = "e2b.app"
	DefaultRequestTimeout = e2bapi.DefaultRequestTimeout
	DefaultMaxRetries     = 4

	// maxMaxRetries bounds max_retries: more attempts than this with backoff
	// would keep one Terraform operation waiting for hours.
	maxMaxRetries = 100

	EnvAPIKey     = "E2B_API_KEY" //nolint:gosec // G101: the variable's name, not a credential
	EnvDomain     = "E2B_DOMAIN"
	EnvAPIURL     = "E2B_API_URL"
	EnvSandboxURL = "E2B_SANDBOX_URL"
)

// ErrMissingAPIKey is returned by ProviderData.RequireAPIKey.
var ErrMissingAPIKey = errors.New("no E2B API key: set api_key in the provider block or the " + EnvAPIKey + " environment variable")

// ProviderData is the resolved provider configuration handed to every
// resource, data source and ephemeral resource through their Configure
// methods. Values come from the provider block, then the environment, then
// the defaults.
type ProviderData struct {
	// APIURL is the control-plane base URL without a trailing slash.
	APIURL string
	// APIKey may be empty: the provider starts without one so that plans
	// that need no API work; call RequireAPIKey before using the API.
	APIKey string
	Domain string
	// SandboxURL, when set, is the fixed envd base URL for every sandbox
	// (without a trailing slash); empty means E2B's shared sandbox host
	// https://sandbox.<domain>, which routes by request headers (Envd).
	SandboxURL     string
	RequestTimeout time.Duration
	MaxRetries     int
	// Version is the provider's version, for the User-Agent header.
	Version string

	// api is the instance's shared API client (provider_data.go).
	api *apiClient
	// defaultTag sees the plans that decide default tags (common_default_tag.go).
	defaultTag *defaultTagPlans
	// leftRunning are the builds earlier applies left running (template_build_left_running.go).
	leftRunning *leftRunningBuilds
	// planAPI is the client of the plan-time checks, nil when they are skipped
	// (common_plan_checks.go).
	planAPI *planAPI
	// apiKeyFrom names the environment variable the key came from ("" for the
	// provider block), for messages.
	apiKeyFrom string
}

// RequireAPIKey returns ErrMissingAPIKey when no API key was configured.
func (d *ProviderData) RequireAPIKey() error {
	if d.APIKey == "" {
		return ErrMissingAPIKey
	}
	return nil
}

var (
	_ provider.Provider                       = (*e2bProvider)(nil)
	_ provider.ProviderWithActions            = (*e2bProvider)(nil)
	_ provider.ProviderWithEphemeralResources = (*e2bProvider)(nil)
	_ provider.ProviderWithFunctions          = (*e2bProvider)(nil)
	_ provider.ProviderWithListResources      = (*e2bProvider)(nil)
)

type e2bProvider struct {
	version string
}

// New returns the provider factory that providerserver.Serve expects.
func New(version string) func() provider.Provider {
	return func() provider.Provider {
		return &e2bProvider{version: version}
	}
}

// providerModel is the provider block as Terraform sends it.
type providerModel struct {
	APIKey         types.String `tfsdk:"api_key"`
	Domain         types.String `tfsdk:"domain"`
	APIURL         types.String `tfsdk:"api_url"`
	SandboxURL     types.String `tfsdk:"sandbox_url"`
	RequestTimeout types.String `tfsdk:"request_timeout"`
	MaxRetries     types.Int64  `tfsdk:"max_retries"`
}

func (p *e2bProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "e2b"
	resp.Version = p.version
}

func (p *e2bProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Builds and manages [E2B](https://e2b.dev) sandbox templates, on E2B or on the " +
			"E2B-compatible local server this provider's binary carries. Every attribute is optional; values in " +
			"the provider block win over the environment variables, which win over the defaults.",
		Attributes: map[string]schema.Attribute{
			"api_key": schema.StringAttribute{
				MarkdownDescription: "E2B API key (`e2b_` followed by hex digits), sent as `X-API-Key`. " +
					"Defaults to the `" + EnvAPIKey + "` environment variable. The provider starts without one; " +
					"resources and data sources that call the API fail with a clear error when it is missing. " +
					"A key of another format is accepted with a warning. When the key and the API's address are known, " +
					"the plan asks the API once whether it accepts the key, and a refused key fails the plan naming where " +
					"it came from; an API that does not answer within 10 seconds (or `request_timeout`) skips the check.",
				Optional:  true,
				Sensitive: true,
			},
			"domain": schema.StringAttribute{
				MarkdownDescription: "E2B domain, a bare DNS name without scheme, port or path; the API URL is " +
					"`https://api.<domain>` unless `api_url` is set, and sandboxes are reached at " +
					"`https://sandbox.<domain>` unless `sandbox_url` is set. Defaults to the `" + EnvDomain +
					"` environment variable (used, and checked, only when one of those addresses is derived " +
					"from it), then `" + DefaultDomain + "`.",
				Optional:   true,
				Validators: []validator.String{domainValidator()},
			},
			"api_url": schema.StringAttribute{
				MarkdownDescription: "Control-plane API base URL, overriding the one derived from `domain` " +
					"(for example `http://127.0.0.1:3000` for the local server). Defaults to the `" + EnvAPIURL +
					"` environment variable. `http://` is accepted only for loopback hosts, because the API key " +
					"would otherwise cross the network in clear text.",
				Optional: true,
			},
			"sandbox_url": schema.StringAttribute{
				MarkdownDescription: "Fixed base URL of envd, the daemon inside every sandbox, instead of E2B's " +
					"shared sandbox host `https://sandbox.<domain>` (requests name the sandbox in the " +
					"`E2b-Sandbox-Id` and `E2b-Sandbox-Port` headers either way). Defaults to the `" + EnvSandboxURL +
					"` environment variable. `http://` is accepted only for loopback hosts, as for `api_url`; " +
					"a query or fragment is refused.",
				Optional:   true,
				Validators: []validator.String{baseURLValidator("sandbox_url")},
			},
			"request_timeout": schema.StringAttribute{
				MarkdownDescription: "Time limit of one HTTP request to the API, as a Go duration such as `60s` " +
					"or `2m`, from `1s` to `24h`. Defaults to `60s`. Long operations such as template builds are limited by the " +
					"resources' own timeouts, not by this.",
				Optional:   true,
				Validators: []validator.String{durationValidator(requestTimeoutRange)},
			},
			"max_retries": schema.Int64Attribute{
				MarkdownDescription: fmt.Sprintf("How many times a failed API request is retried when retrying "+
					"is safe (connection errors, 429, 502, 503, 504), with backoff that honours `Retry-After`. "+
					"From 0 to %d; defaults to %d.", maxMaxRetries, DefaultMaxRetries),
				Optional:   true,
				Validators: []validator.Int64{int64Between(0, maxMaxRetries)},
			},
		},
	}
}

// The values written in the provider block are checked by the attributes'
// validators, so that `terraform validate` reports them; values unknown then
// (from other resources) and values from the environment are checked by
// Configure with the same rules, once they are known.

// Configure resolves the configuration into a ProviderData and checks the API
// key with the API once (checkAPIKeyAtPlan). When any value
// is still unknown (it comes from a resource not yet created) it returns
// without data and without error: Terraform configures the provider again
// during apply, when the value is known, and resources must treat missing
// provider data as "not configured yet".
func (p *e2bProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if m.APIKey.IsUnknown() || m.Domain.IsUnknown() || m.APIURL.IsUnknown() || m.SandboxURL.IsUnknown() ||
		m.RequestTimeout.IsUnknown() || m.MaxRetries.IsUnknown() {
		return
	}
	data, diags := resolveProviderData(m, os.Getenv, p.version)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(checkAPIKeyAtPlan(ctx, data)...)
	if resp.Diagnostics.HasError() {
		return
	}
	attachAPIClient(data)
	data.defaultTag = newDefaultTagPlans()
	data.leftRunning = newLeftRunningBuilds()
	resp.ResourceData = data
	resp.DataSourceData = data
	resp.EphemeralResourceData = data
	resp.ListResourceData = data
	resp.ActionData = data
}

func (p *e2bProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{NewTemplateResource, NewTemplateBuildResource, NewAliasResource}
}

func (p *e2bProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{NewProcessDataSource, NewTemplateDataSource, NewAliasDataSource, NewTemplatesDataSource}
}

func (p *e2bProvider) Functions(context.Context) []func() function.Function {
	return []func() function.Function{
		NewWaitForPortFunction, NewWaitForURLFunction, NewWaitForProcessFunction,
		NewWaitForFileFunction, NewWaitForTimeoutFunction,
	}
}

func (p *e2bProvider) ListResources(context.Context) []func() list.ListResource {
	return []func() list.ListResource{NewTemplateListResource, NewTemplateBuildListResource, NewAliasListResource}
}

func (p *e2bProvider) EphemeralResources(context.Context) []func() ephemeral.EphemeralResource {
	return []func() ephemeral.EphemeralResource{NewProcessEphemeralResource}
}

func (p *e2bProvider) Actions(context.Context) []func() action.Action {
	return []func() action.Action{NewProcessAction}
}

// resolveProviderData merges a fully known provider block with the
// environment (read through getenv) and the defaults, and checks the result.
func resolveProviderData(m providerModel, getenv func(string) string, version string) (*ProviderData, diag.Diagnostics) {
	var diags diag.Diagnostics
	data := &ProviderData{Version: version}

	// pick returns the config value when set, else the environment's; from
	// names the variable when the value came from there (for messages), and
	// ok is false when neither gave a value.
	pick := func(v types.String, env string) (value, from string, ok bool) {
		if !v.IsNull() {
			return v.ValueString(), "", true
		}
		if e := getenv(env); e != "" {
			return e, env, true
		}
		return "", "", false
	}

	if data.APIKey, data.apiKeyFrom, _ = pick(m.APIKey, EnvAPIKey); data.APIKey != "" {
		diags.Append(checkAPIKey(data.APIKey, data.apiKeyFrom)...)
	}

	var ok bool
	domainFrom := ""
	if data.Domain, domainFrom, ok = pick(m.Domain, EnvDomain); !ok {
		data.Domain = DefaultDomain
	}
	apiURL, apiFrom, hasAPIURL := pick(m.APIURL, EnvAPIURL)
	sandboxURL, sandboxFrom, hasSandboxURL := pick(m.SandboxURL, EnvSandboxURL)
	// The domain is checked where an address is derived from it. With both URLs set it
	// is not: E2B_DOMAIN is the SDKs' variable too, and a local server started with
	// --domain localhost:<port> prints that for them beside E2B_API_URL and E2B_SANDBOX_URL. In
	// the provider block the attribute's validator checks it always.
	if !hasAPIURL || !hasSandboxURL {
		addErr(&diags, "domain", domainFrom, safehttp.ValidateDomain(data.Domain))
	}
	if hasAPIURL {
		data.APIURL = baseURL(&diags, "api_url", apiFrom, apiURL)
	} else {
		// A valid domain makes this a valid https URL.
		data.APIURL = "https://api." + data.Domain
	}
	if hasSandboxURL {
		data.SandboxURL = baseURL(&diags, "sandbox_url", sandboxFrom, sandboxURL)
	}

	data.RequestTimeout = DefaultRequestTimeout
	if !m.RequestTimeout.IsNull() {
		d, err := requestTimeoutRange.parse(m.RequestTimeout.ValueString())
		addErr(&diags, "request_timeout", "", err)
		data.RequestTimeout = d
	}

	data.MaxRetries = DefaultMaxRetries
	if !m.MaxRetries.IsNull() {
		n, err := checkMaxRetries(m.MaxRetries.ValueInt64())
		addErr(&diags, "max_retries", "", err)
		data.MaxRetries = n
	}

	if diags.HasError() {
		return nil, diags
	}
	return data, diags
}

// addErr records err, if any, as an error on the attribute, naming the
// environment variable when the value came from one.
func addErr(diags *diag.Diagnostics, attr, fromEnv string, err error) {
	if err == nil {
		return
	}
	detail := err.Error()
	if fromEnv != "" {
		detail += fmt.Sprintf(" (value taken from the %s environment variable)", fromEnv)
	}
	diags.AddAttributeError(path.Root(attr), "Invalid "+attr, detail)
}

// baseURL is raw without a trailing slash when it follows safehttp's rule.
func baseURL(diags *diag.Diagnostics, attr, fromEnv, raw string) string {
	u, err := safehttp.ParseBaseURL(attr, raw)
	if err != nil {
		addErr(diags, attr, fromEnv, err)
		return ""
	}
	return u.String()
}

func checkAPIKey(key, fromEnv string) diag.Diagnostics {
	var diags diag.Diagnostics
	if e2b.IsAPIKey(key) {
		return diags
	}
	detail := "api_key does not look like an E2B API key (e2b_ followed by lower-case hex digits); it is used as given."
	if fromEnv != "" {
		detail += fmt.Sprintf(" The value was taken from the %s environment variable.", fromEnv)
	}
	diags.AddAttributeWarning(path.Root("api_key"), "Unusual api_key format", detail)
	return diags
}

func checkMaxRetries(n int64) (int, error) {
	if n < 0 || n > maxMaxRetries {
		return 0, fmt.Errorf("max_retries is %d; it must be from 0 to %d", n, maxMaxRetries)
	}
	return int(n), nil
}
