package provider

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	envd "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/templatebuild"
)

// apiClient holds the one control-plane client of a provider instance and
// the build runner over it, built on first use so that a provider without an
// API key still serves plans that need no API. Every resource, data source
// and ephemeral resource of the instance shares them (and with them the HTTP
// connection pool and the coordination of the instance's builds).
type apiClient struct {
	once   sync.Once
	client *e2bapi.Client
	runner *templatebuild.Runner
	err    error
}

// attachAPIClient gives data its shared client holder; Configure calls it
// once per provider instance.
func attachAPIClient(data *ProviderData) {
	data.api = &apiClient{}
}

// API returns the provider instance's control-plane client, or an error
// naming what is missing (no API key, a bad URL).
func (d *ProviderData) API() (*e2bapi.Client, error) {
	if err := d.RequireAPIKey(); err != nil {
		return nil, err
	}
	d.api.once.Do(func() {
		d.api.client, d.api.err = e2bapi.New(e2bapi.Config{
			BaseURL:        d.APIURL,
			APIKey:         d.APIKey,
			UserAgent:      d.userAgent(),
			RequestTimeout: d.RequestTimeout,
			MaxRetries:     d.MaxRetries,
			Logger:         tflogLogger{},
		})
		if d.api.err == nil {
			d.api.runner = templatebuild.NewRunner(d.api.client)
		}
	})
	return d.api.client, d.api.err
}

// Runner returns the provider instance's build runner, or an error as API
// does.
func (d *ProviderData) Runner() (*templatebuild.Runner, error) {
	if _, err := d.API(); err != nil {
		return nil, err
	}
	return d.api.runner, nil
}

// Envd returns a client for the envd of one sandbox: at sandbox_url when
// configured, else at E2B's shared sandbox host https://sandbox.<domain> of
// the sandbox's domain (or the provider's when the sandbox names none); the
// client names the sandbox in request headers either way.
func (d *ProviderData) Envd(sb *e2b.Sandbox) (*envd.Client, error) {
	domain := d.Domain
	if sb.Domain != nil && *sb.Domain != "" {
		domain = *sb.Domain
	}
	return envd.New(envd.Config{
		BaseURL:     d.SandboxURL,
		Domain:      domain,
		SandboxID:   sb.SandboxID,
		AccessToken: sb.EnvdAccessToken,
		HTTPClient:  &http.Client{},
		UserAgent:   d.userAgent(),
	})
}

func (d *ProviderData) userAgent() string {
	v := d.Version
	if v == "" {
		v = "dev"
	}
	return "terraform-provider-e2b/" + v
}

// logContext masks the secrets of the configuration in every log entry
// written with the returned context, whatever field or message carries them.
func (d *ProviderData) logContext(ctx context.Context) context.Context {
	ctx = tflog.MaskFieldValuesWithFieldKeys(ctx, "api_key", "x-api-key", "X-API-Key", "access_token",
		"envd_access_token", "password", "aws_secret_access_key", "service_account_json")
	// Not MaskAllFieldValuesStrings: tflog applies it by rewriting the
	// context's shared field map, a data race when goroutines (parallel
	// uploads) log with one context. The API client redacts the key from
	// the field values it logs itself.
	if d.APIKey != "" {
		ctx = tflog.MaskMessageStrings(ctx, d.APIKey)
	}
	return ctx
}

// tflogLogger adapts tflog to the API client's Logger.
type tflogLogger struct{}

func (tflogLogger) Debug(ctx context.Context, msg string, fields map[string]any) {
	tflog.Debug(ctx, msg, fields)
}

func (tflogLogger) Info(ctx context.Context, msg string, fields map[string]any) {
	tflog.Info(ctx, msg, fields)
}

func (tflogLogger) Warn(ctx context.Context, msg string, fields map[string]any) {
	tflog.Warn(ctx, msg, fields)
}

// providerDataFrom converts what Configure received into *ProviderData. It
// returns nil without error when the provider is not configured yet (values
// unknown during plan).
func providerDataFrom(v any) (*ProviderData, diag.Diagnostics) {
	var diags diag.Diagnostics
	if v == nil {
		return nil, diags
	}
	data, ok := v.(*ProviderData)
	if !ok {
		diags.AddError("Unexpected provider data",
			fmt.Sprintf("expected *provider.ProviderData, got %T; this is a bug in the provider", v))
		return nil, diags
	}
	return data, diags
}

// requireData is the error for an operation that needs the API while the
// provider is not configured (its configuration is still unknown).
func requireData(data *ProviderData, diags *diag.Diagnostics) bool {
	if data == nil {
		diags.AddError("Provider not configured",
			"The e2b provider's configuration is not known yet, so the API cannot be called. "+
				"This happens when provider arguments depend on resources that are not created yet.")
		return false
	}
	return true
}

// apiOrError returns the shared API client, adding an error to diags when
// it cannot be had.
func apiOrError(data *ProviderData, diags *diag.Diagnostics) *e2bapi.Client {
	return orError(data, diags, (*ProviderData).API)
}

// runnerOrError returns the shared build runner, adding an error to diags
// when it cannot be had.
func runnerOrError(data *ProviderData, diags *diag.Diagnostics) *templatebuild.Runner {
	return orError(data, diags, (*ProviderData).Runner)
}

// orError returns what get has of data, adding an error to diags (and
// returning the zero value) when data is not configured or get fails.
func orError[T any](data *ProviderData, diags *diag.Diagnostics, get func(*ProviderData) (T, error)) T {
	var zero T
	if !requireData(data, diags) {
		return zero
	}
	v, err := get(data)
	if err != nil {
		diags.AddError("E2B API client", err.Error())
		return zero
	}
	return v
}
