package provider

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/safehttp"
)

// The one style of the provider's attribute errors: the title names the attribute
// ("Invalid memory_mb"), the detail says the value, what is allowed and, when there is
// more to say, what is wrong with it: "memory_mb is 1; it must be an even number of at
// least 128." Every validator here and the checks of ValidateConfig use addInvalid.

// addInvalid adds that error for the value at p; why, when not nil, follows.
func addInvalid(diags *diag.Diagnostics, p path.Path, value, allowed string, why error) {
	name, subject := attributeName(p), "is"
	if name != p.String() {
		subject = "holds" // an element of a set or map
	}
	detail := fmt.Sprintf("%s %s %s; it %s.", name, subject, value, allowed)
	if why != nil {
		reason := []rune(strings.TrimSuffix(why.Error(), "."))
		reason[0] = unicode.ToUpper(reason[0])
		detail += " " + string(reason) + "."
	}
	diags.AddAttributeError(shownPath(p), "Invalid "+name, detail)
}

// attributeName is p without the element steps of a set or map, whose values
// (tags[Value("x")]) say nothing a reader needs in a title.
func attributeName(p path.Path) string {
	for {
		last, _ := p.Steps().LastStep()
		if _, isElement := last.(path.PathStepElementKeyValue); !isElement {
			return p.String()
		}
		p = p.ParentPath()
	}
}

// shownPath is where Terraform and OpenTofu can point for p: they find an attribute
// of the configuration by its first step (and an element index after it), not inside
// the object an attribute such as gate = { … } is set to, and point at the resource's
// first line for a path they cannot follow. The title names the full path.
func shownPath(p path.Path) path.Path {
	steps := p.Steps()
	if len(steps) <= 1 {
		return p
	}
	if _, isElement := steps[1].(path.PathStepElementKeyValue); isElement && len(steps) == 2 {
		return p
	}
	root, _ := steps.NextStep()
	name, _ := root.(path.PathStepAttributeName)
	return path.Root(string(name))
}

// allowed is what a validator accepts ("must be …"): its description and the
// middle of its errors.
type allowed string

func (a allowed) Description(context.Context) string         { return string(a) }
func (a allowed) MarkdownDescription(context.Context) string { return string(a) }

// stringCheck is a plan-time string validator from what is allowed and a check
// function (why a value is not); unknown and null values are left for later.
type stringCheck struct {
	allowed
	check func(string) error
}

func (v stringCheck) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := v.check(req.ConfigValue.ValueString()); err != nil {
		addInvalid(&resp.Diagnostics, req.Path, fmt.Sprintf("%q", req.ConfigValue.ValueString()), string(v.allowed), err)
	}
}

// int64Check is stringCheck for numbers: ok says whether a value is allowed.
type int64Check struct {
	allowed
	ok func(int64) bool
}

func (v int64Check) ValidateInt64(_ context.Context, req validator.Int64Request, resp *validator.Int64Response) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if n := req.ConfigValue.ValueInt64(); !v.ok(n) {
		addInvalid(&resp.Diagnostics, req.Path, fmt.Sprint(n), string(v.allowed), nil)
	}
}

// int64Between accepts min to max.
func int64Between(low, high int64) int64Check {
	return int64Check{allowed(fmt.Sprintf("must be from %d to %d", low, high)), func(n int64) bool { return n >= low && n <= high }}
}

// cpuCountValidator accepts the CPU counts E2B builds with.
func cpuCountValidator() int64Check {
	return int64Check{"must be 1 or an even number up to 32", func(n int64) bool { return n == 1 || (n >= 2 && n <= 32 && n%2 == 0) }}
}

// memoryMBValidator accepts the memory sizes E2B builds with.
func memoryMBValidator() int64Check {
	return int64Check{"must be an even number of at least 128", func(n int64) bool { return n >= 128 && n%2 == 0 }}
}

// templateNameValidator accepts "[namespace/]alias" without a tag: the name
// of a template, as e2b_template takes it.
func templateNameValidator() validator.String {
	return stringCheck{"must be an E2B template name: [namespace/]alias of lower-case a-z, 0-9, '-' and '_', without a tag", checkTemplateName}
}

func checkTemplateName(s string) error {
	// E2B lower-cases and trims a name before it checks it, so its errors speak of
	// the alias "my app" where the configuration says "My App".
	if suggested := strings.Join(strings.Fields(strings.ToLower(s)), "-"); suggested != s {
		if _, err := e2b.ParseName(suggested); err == nil && !strings.Contains(suggested, ":") {
			return fmt.Errorf("it has spaces or upper-case letters: write %q", suggested)
		}
		return errors.New("it has spaces or upper-case letters")
	}
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
			addInvalid(&diags, p, fmt.Sprintf("%q", v.ValueString()), r.describe(), err)
		}
	}
	return diags
}

// describe is what r accepts, for messages.
func (r durationRange) describe() string {
	return "must be a duration such as 30s or 5m, " + r.String()
}

// durationValidator accepts a Go duration such as "30s" within r.
func durationValidator(r durationRange) validator.String {
	return stringCheck{allowed(r.describe()), func(s string) error {
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
			addInvalid(&resp.Diagnostics, req.Path.AtListIndex(i), fmt.Sprintf("step %d, which sets %s", i+1, described),
				"must set exactly one of run, copy, env, workdir and user", nil)
		}
		if run, ok := obj.Attributes()["run"].(types.Object); ok && !run.IsNull() && !run.IsUnknown() {
			command, commands := run.Attributes()["command"], run.Attributes()["commands"]
			if command != nil && commands != nil && command.IsNull() == commands.IsNull() {
				sets := "neither of command and commands"
				if !command.IsNull() {
					sets = "both command and commands"
				}
				addInvalid(&resp.Diagnostics, req.Path.AtListIndex(i).AtName("run"), fmt.Sprintf("the run of step %d, which sets %s", i+1, sets),
					"must set exactly one of command and commands", nil)
			}
		}
	}
}
