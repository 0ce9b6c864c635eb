package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/safehttp"
)

// stringCheck is a plan-time string validator from a description and a
// check function; unknown and null values are left for later.
type stringCheck struct {
	description string
	check       func(string) error
}

func (v stringCheck) Description(context.Context) string         { return v.description }
func (v stringCheck) MarkdownDescription(context.Context) string { return v.description }

func (v stringCheck) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := v.check(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid "+req.Path.String(), err.Error())
	}
}

// templateNameValidator accepts "[namespace/]alias" without a tag: the name
// of a template, as e2b_template takes it.
func templateNameValidator() validator.String {
	return stringCheck{"must be an E2B template name: [namespace/]alias of a-z, 0-9, '-' and '_', without a tag", checkTemplateName}
}

func checkTemplateName(s string) error {
	n, err := e2b.ParseName(s)
	if err != nil {
		return err
	}
	if strings.Contains(s, ":") {
		return fmt.Errorf("template name %q must not carry a tag; tags are set with e2b_template_build's tags or e2b_alias", s)
	}
	if n.String() != s {
		return fmt.Errorf("template name %q must be written in its canonical form %q", s, n.String())
	}
	return nil
}

// templateRefValidator accepts what identifies a template: an ID or a name
// without a tag.
func templateRefValidator() validator.String {
	return stringCheck{"must be a template ID or name without a tag", func(s string) error {
		if e2b.IsTemplateID(s) {
			return nil
		}
		return checkTemplateName(s)
	}}
}

// templateRunRefValidator accepts what a sandbox can be started from:
// "name[:tag]", "name:<buildID>" or a template ID.
func templateRunRefValidator() validator.String {
	return stringCheck{"must be a template ID, name, name:tag or name:<build ID>", func(s string) error {
		_, err := e2b.ParseName(s)
		return err
	}}
}

// tagValidator accepts a build tag.
func tagValidator() validator.String {
	return stringCheck{"must be a tag (a-z, 0-9, '-', '_', '.')", func(s string) error {
		if err := e2b.ValidateTag(s); err != nil {
			return err
		}
		if strings.ToLower(s) != s {
			return fmt.Errorf("tag %q must be lower case", s)
		}
		return nil
	}}
}

func buildIDValidator() validator.String {
	return stringCheck{"must be a build ID (a UUID)", e2b.ValidateBuildID}
}

func sandboxIDValidator() validator.String {
	return stringCheck{"must be a sandbox ID", e2b.ValidateSandboxID}
}

// domainValidator accepts an E2B domain: a bare DNS name (safehttp.ValidateDomain).
func domainValidator() validator.String {
	return stringCheck{"must be a bare DNS name such as e2b.app, without scheme, port or path", safehttp.ValidateDomain}
}

// baseURLValidator accepts the base URL of a service the provider sends credentials to
// (safehttp.ParseBaseURL): https, or http to a loopback host; attr names it in errors.
func baseURLValidator(attr string) validator.String {
	return stringCheck{"must be an https:// URL, or http:// to a loopback host, without query or fragment", func(s string) error {
		_, err := safehttp.ParseBaseURL(attr, s)
		return err
	}}
}

// durationRange is the range a duration attribute accepts.
type durationRange struct{ min, max time.Duration }

var (
	// processTimeoutRange bounds e2b_process's timeout: the sandbox's lifetime is sent in
	// whole seconds, and E2B keeps a sandbox at most 24 hours (on its largest plans).
	processTimeoutRange = durationRange{time.Second, 24 * time.Hour}
	// requestTimeoutRange bounds the provider's request_timeout.
	requestTimeoutRange = durationRange{time.Second, 24 * time.Hour}
	// buildTimeoutRange bounds e2b_template_build's timeouts.
	buildTimeoutRange = durationRange{time.Second, 7 * 24 * time.Hour}
)

func (r durationRange) String() string {
	return fmt.Sprintf("from %s to %s", formatDuration(r.min), formatDuration(r.max))
}

// formatDuration writes whole hours as "24h" rather than "24h0m0s".
func formatDuration(d time.Duration) string {
	if d >= time.Hour && d%time.Hour == 0 {
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return d.String()
}

// validateTimeouts checks the range of the timeouts named, which the timeouts package
// only parses (a negative one returned at once).
func validateTimeouts(ctx context.Context, config tfsdk.Config, r durationRange, names ...string) (diags diag.Diagnostics) {
	for _, name := range names {
		p := path.Root("timeouts").AtName(name)
		var v types.String
		if d := config.GetAttribute(ctx, p, &v); d.HasError() || v.IsNull() || v.IsUnknown() {
			continue
		}
		if _, err := r.parse(v.ValueString()); err != nil {
			diags.AddAttributeError(p, "Invalid "+p.String(), err.Error())
		}
	}
	return diags
}

// durationValidator accepts a Go duration such as "30s" within r.
func durationValidator(r durationRange) validator.String {
	return stringCheck{"must be a duration such as 30s or 5m, " + r.String(), func(s string) error {
		_, err := r.parse(s)
		return err
	}}
}

// durationSyntax is Go's duration syntax; a value that has it but does not parse is too
// large for a time.Duration.
var durationSyntax = regexp.MustCompile(`^\+?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`)

// parse reads s as a duration within r; errors say the allowed range.
func (r durationRange) parse(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil && durationSyntax.MatchString(s):
		return 0, fmt.Errorf("duration %q is too long: it must be %s", s, r)
	case err != nil:
		return 0, fmt.Errorf("%q is not a duration such as 30s or 5m (%s)", s, r)
	case d < r.min || d > r.max:
		return 0, fmt.Errorf("duration %q is out of range: it must be %s", s, r)
	}
	return d, nil
}

type cpuCountValidator struct{}

func (cpuCountValidator) Description(context.Context) string {
	return "must be 1 or an even number up to 32"
}
func (v cpuCountValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v cpuCountValidator) ValidateInt64(_ context.Context, req validator.Int64Request, resp *validator.Int64Response) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	n := req.ConfigValue.ValueInt64()
	if n < 1 || n > 32 || (n != 1 && n%2 != 0) {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid cpu_count", fmt.Sprintf("cpu_count is %d; it must be 1 or an even number up to 32.", n))
	}
}

type evenValidator struct{}

func (evenValidator) Description(context.Context) string               { return "must be even" }
func (v evenValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v evenValidator) ValidateInt64(_ context.Context, req validator.Int64Request, resp *validator.Int64Response) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if n := req.ConfigValue.ValueInt64(); n%2 != 0 {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid "+req.Path.String(), fmt.Sprintf("%s is %d; it must be an even number.", req.Path, n))
	}
}

// oneStepKind checks the shape of each build step: exactly one kind per step.
type oneStepKind struct{}

func (oneStepKind) Description(context.Context) string {
	return "each step must set exactly one of run, copy, env, workdir and user, and a run exactly one of command and commands"
}
func (v oneStepKind) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (oneStepKind) ValidateList(_ context.Context, req validator.ListRequest, resp *validator.ListResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	for i, el := range req.ConfigValue.Elements() {
		obj, ok := el.(types.Object)
		if !ok || obj.IsUnknown() || obj.IsNull() {
			continue
		}
		var set []string
		for _, k := range []string{"run", "copy", "env", "workdir", "user"} {
			if v := obj.Attributes()[k]; v != nil && !v.IsNull() {
				set = append(set, k)
			}
		}
		if len(set) != 1 {
			described := "none"
			if len(set) > 0 {
				described = strings.Join(set, " and ")
			}
			resp.Diagnostics.AddAttributeError(req.Path.AtListIndex(i), "Invalid build step",
				fmt.Sprintf("Step %d must set exactly one of run, copy, env, workdir and user; it sets %s.", i+1, described))
		}
		if run, ok := obj.Attributes()["run"].(types.Object); ok && !run.IsNull() && !run.IsUnknown() {
			command, commands := run.Attributes()["command"], run.Attributes()["commands"]
			if command != nil && commands != nil && command.IsNull() == commands.IsNull() {
				resp.Diagnostics.AddAttributeError(req.Path.AtListIndex(i).AtName("run"), "Invalid build step",
					fmt.Sprintf("Step %d: run must set exactly one of command and commands.", i+1))
			}
		}
	}
}
