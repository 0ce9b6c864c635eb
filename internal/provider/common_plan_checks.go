package provider

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/safehttp"
)

// The plan-time checks: what can be known wrong before anything is created is
// reported by the plan. Configure asks the API once whether the key is accepted;
// e2b_alias's ModifyPlan asks whether its build belongs to its template. Both are
// advisory about reachability: an API that does not answer (refused, unknown host,
// no answer within planCheckTimeout) or answers with anything but a verdict skips
// the check, so that a plan never fails or waits for long because the API is away,
// and the call that needs the API reports the problem as before.

// planCheckTimeout bounds each plan-time request; the checks make one attempt, no
// retries.
const planCheckTimeout = 10 * time.Second

// planAPI is the client of the plan-time checks, set by Configure when the API
// accepted the key; nil when there was no key or no verdict (the checks are skipped).
type planAPI struct {
	client *e2bapi.Client
}

// checkAPIKeyAtPlan asks the API, once, whether it accepts data's key (GET
// /v2/templates with limit 1, the cheapest authenticated request), and sets
// data.planAPI when it does. A refusal (401, 403) is an error on api_key naming where
// the key came from.
func checkAPIKeyAtPlan(ctx context.Context, data *ProviderData) diag.Diagnostics {
	var diags diag.Diagnostics
	if data.APIKey == "" {
		return diags
	}
	client, err := e2bapi.New(e2bapi.Config{
		BaseURL: data.APIURL, APIKey: data.APIKey, UserAgent: data.userAgent(),
		RequestTimeout: min(planCheckTimeout, data.RequestTimeout), Logger: tflogLogger{},
	})
	if err != nil {
		return diags // resolveProviderData checked the URL; API() reports anything else
	}
	ctx = data.logContext(ctx)
	for _, err = range client.Templates(ctx, 1) {
		break
	}
	var apiErr *e2bapi.APIError
	switch {
	case err == nil:
		data.planAPI = &planAPI{client: client}
	case errors.As(err, &apiErr) && (apiErr.StatusCode == http.StatusUnauthorized || apiErr.StatusCode == http.StatusForbidden):
		diags.AddAttributeError(path.Root("api_key"), "API key refused", apiKeyRefused(data, apiErr))
	default:
		tflog.Warn(ctx, "API key not checked at plan: the API gave no verdict", map[string]any{"error": err.Error()})
	}
	return diags
}

// apiKeyRefused is the detail of a key the API refused: where the key came from and
// where the right one is.
func apiKeyRefused(data *ProviderData, err *e2bapi.APIError) string {
	source := "the provider block's api_key"
	if data.apiKeyFrom != "" {
		source = "the " + data.apiKeyFrom + " environment variable (the provider block sets no api_key)"
	}
	detail := fmt.Sprintf("The E2B API at %s refused the API key from %s: %v.", data.APIURL, source, err)
	if u, perr := safehttp.ParseBaseURL("api_url", data.APIURL); perr == nil && safehttp.IsLoopbackHost(u.Hostname()) {
		return detail + " For the local server, use the key it printed as " + EnvAPIKey + " when it started; " +
			"it keeps it in the file api-key of its data directory (--data-dir)."
	}
	return detail + " Use a key of your team from the E2B dashboard (https://e2b.dev/dashboard, API Keys)."
}

// checkAliasBuildAtPlan reports, as an error on build_id, a build the template
// exists without. A template that does not exist yet (created in the same apply), an
// API without a verdict or a build it cannot place skip the check.
func checkAliasBuildAtPlan(ctx context.Context, data *ProviderData, template, buildID string) diag.Diagnostics {
	var diags diag.Diagnostics
	if data == nil || data.planAPI == nil {
		return diags
	}
	ctx = data.logContext(ctx)
	ctx, cancel := context.WithTimeout(ctx, planCheckTimeout)
	defer cancel()
	api := data.planAPI.client
	templateID, err := readTemplateID(ctx, api, template)
	if err != nil {
		if !e2bapi.IsNotFound(err) {
			tflog.Warn(ctx, "build of the alias not checked at plan", map[string]any{"error": err.Error()})
		}
		return diags
	}
	_, err = api.GetBuildStatus(ctx, templateID, buildID, math.MaxInt32)
	switch {
	case e2bapi.IsBuildGone(err):
		diags.AddAttributeError(path.Root("build_id"), "Build not of this template", fmt.Sprintf(
			"Template %s has no build %s. build_id must name a build of the alias's template, such as "+
				"e2b_template_build.<name>.build_id of a build whose template_id is that template's.", template, buildID))
	case err != nil:
		tflog.Warn(ctx, "build of the alias not checked at plan", map[string]any{"error": err.Error()})
	}
	return diags
}
