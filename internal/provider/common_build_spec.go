package provider

// The configured build of e2b_template_build: the nested schemas and models of its
// steps and registry credentials, and the configuration as the templatebuild.Spec that
// package templatebuild plans and runs.

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/templatebuild"
)

type registryModel struct {
	Type                        types.String `tfsdk:"type"`
	Username                    types.String `tfsdk:"username"`
	Password                    types.String `tfsdk:"password"`
	PasswordWO                  types.String `tfsdk:"password_wo"`
	PasswordWOVersion           types.Int64  `tfsdk:"password_wo_version"`
	AWSAccessKeyID              types.String `tfsdk:"aws_access_key_id"`
	AWSSecretAccessKey          types.String `tfsdk:"aws_secret_access_key"`
	AWSSecretAccessKeyWO        types.String `tfsdk:"aws_secret_access_key_wo"`
	AWSSecretAccessKeyWOVersion types.Int64  `tfsdk:"aws_secret_access_key_wo_version"`
	AWSRegion                   types.String `tfsdk:"aws_region"`
	ServiceAccountJSON          types.String `tfsdk:"service_account_json"`
	ServiceAccountJSONWO        types.String `tfsdk:"service_account_json_wo"`
	ServiceAccountJSONWOVersion types.Int64  `tfsdk:"service_account_json_wo_version"`
}

type stepModel struct {
	Run       *runStepModel  `tfsdk:"run"`
	Copy      *copyStepModel `tfsdk:"copy"`
	Env       types.Map      `tfsdk:"env"`
	Workdir   types.String   `tfsdk:"workdir"`
	User      types.String   `tfsdk:"user"`
	SkipCache types.Bool     `tfsdk:"skip_cache"`
}

type runStepModel struct {
	Command  types.String `tfsdk:"command"`
	Commands types.List   `tfsdk:"commands"`
	User     types.String `tfsdk:"user"`
}

type copyStepModel struct {
	Src             types.String `tfsdk:"src"`
	Dest            types.String `tfsdk:"dest"`
	User            types.String `tfsdk:"user"`
	Mode            types.String `tfsdk:"mode"`
	ResolveSymlinks types.Bool   `tfsdk:"resolve_symlinks"`
	ForceUpload     types.Bool   `tfsdk:"force_upload"`
}

var modePattern = regexp.MustCompile(`^0?[0-7]{3}$`)

// stepsAttribute is the schema of steps: one nested object per step model.
func stepsAttribute() schema.ListNestedAttribute {
	return schema.ListNestedAttribute{
		MarkdownDescription: "Build steps, run in order (after a `dockerfile`'s own). Each step sets exactly one of " +
			"`run`, `copy`, `env`, `workdir` and `user`, and may set `skip_cache`.",
		Optional: true,
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"run": schema.SingleNestedAttribute{
				MarkdownDescription: "Run a shell command (`bash -l -c`); a non-zero exit fails the build. " +
					"Exactly one of `command` and `commands` is required.",
				Optional: true,
				Attributes: map[string]schema.Attribute{
					"command": schema.StringAttribute{
						MarkdownDescription: "The command.",
						Optional:            true,
					},
					"commands": schema.ListAttribute{
						MarkdownDescription: "Commands joined with ` && ` into one step, as the SDK's `runCmd([...])`: the first to fail stops the step.",
						ElementType:         types.StringType,
						Optional:            true,
						Validators:          []validator.List{listvalidator.SizeAtLeast(1), listvalidator.ValueStringsAre(stringvalidator.LengthAtLeast(1))},
					},
					"user": schema.StringAttribute{MarkdownDescription: "User to run it as, for this step only.", Optional: true},
				},
			},
			"copy": schema.SingleNestedAttribute{
				MarkdownDescription: "Copy files from `context` into the template, with Docker's COPY semantics.",
				Optional:            true,
				Attributes: map[string]schema.Attribute{
					"src": schema.StringAttribute{
						MarkdownDescription: "Source relative to `context`: a file, a directory or a glob (`*`, `?`, `[...]`, `**`). It must stay inside the context.",
						Required:            true,
						Validators:          []validator.String{stringCheck{"must be a relative path inside the context", templatebuild.CheckCopySource}},
					},
					"dest": schema.StringAttribute{MarkdownDescription: "Destination; a trailing `/` copies into that directory.", Required: true},
					"user": schema.StringAttribute{MarkdownDescription: "Owner (`user` or `user:group`) of the copied files; defaults to the current user.", Optional: true},
					"mode": schema.StringAttribute{
						MarkdownDescription: "Octal permissions applied to the copied files, such as `0755`.",
						Optional:            true,
						Validators:          []validator.String{stringvalidator.RegexMatches(modePattern, "must be octal permissions such as 0755")},
					},
					"resolve_symlinks": schema.BoolAttribute{
						MarkdownDescription: "Copy what symlinks inside the context point to instead of the links. Defaults to `false`.",
						Optional:            true,
					},
					"force_upload": schema.BoolAttribute{
						MarkdownDescription: "Upload the files even when E2B already has an archive with their files hash, and " +
							"run this step without the layer cache (the SDK's `forceUpload`; E2B then rebuilds every later " +
							"step too, as after any uncached one). Defaults to `false`.",
						Optional: true,
					},
				},
			},
			"env": schema.MapAttribute{
				MarkdownDescription: "Environment variables for later steps and for sandboxes (`$VAR` is expanded).",
				ElementType:         types.StringType,
				Optional:            true,
			},
			"workdir": schema.StringAttribute{MarkdownDescription: "Working directory for later steps and sandboxes; created when missing.", Optional: true},
			"user":    schema.StringAttribute{MarkdownDescription: "User for later steps and sandboxes; created when missing.", Optional: true},
			"skip_cache": schema.BoolAttribute{
				MarkdownDescription: "Run this step and every later one without E2B's layer cache (the SDK's " +
					"`skipCache()`), such as to fetch the newest packages again. Defaults to `false`.",
				Optional: true,
			},
		}},
		Validators:    []validator.List{listvalidator.SizeAtLeast(1), oneStepKind{}},
		PlanModifiers: []planmodifier.List{replaceUnlessImported{}},
	}
}

// registryAttributes are the attributes of from_image_registry: each secret is either a
// plain attribute (kept in the state) or a write-only one with the version that makes a
// change of it plannable.
func registryAttributes() map[string]schema.Attribute {
	attrs := map[string]schema.Attribute{
		"type": schema.StringAttribute{
			MarkdownDescription: "`registry`, `aws` or `gcp`.",
			Required:            true,
			Validators:          []validator.String{stringvalidator.OneOf("registry", "aws", "gcp")},
		},
		"username":          schema.StringAttribute{MarkdownDescription: "Registry user (`registry`).", Optional: true},
		"aws_access_key_id": schema.StringAttribute{MarkdownDescription: "AWS access key ID (`aws`).", Optional: true},
		"aws_region":        schema.StringAttribute{MarkdownDescription: "AWS region (`aws`).", Optional: true},
	}
	for _, secret := range []struct{ name, what string }{
		{"password", "Registry password (`registry`)"},
		{"aws_secret_access_key", "AWS secret access key (`aws`)"},
		{"service_account_json", "GCP service account key as JSON (`gcp`)"},
	} {
		plain, wo, version := secret.name, secret.name+"_wo", secret.name+"_wo_version"
		sibling := func(name string) path.Expression { return path.MatchRelative().AtParent().AtName(name) }
		attrs[plain] = schema.StringAttribute{
			MarkdownDescription: secret.what + ". Kept in the state; prefer `" + wo + "`.",
			Optional:            true,
			Sensitive:           true,
			Validators:          []validator.String{stringvalidator.ConflictsWith(sibling(wo))},
		}
		attrs[wo] = schema.StringAttribute{
			MarkdownDescription: secret.what + ", write-only (Terraform/OpenTofu 1.11+): sent to E2B, never stored. " +
				"Requires `" + version + "`.",
			Optional:   true,
			Sensitive:  true,
			WriteOnly:  true,
			Validators: []validator.String{stringvalidator.AlsoRequires(sibling(version))},
		}
		attrs[version] = schema.Int64Attribute{
			MarkdownDescription: "Version of `" + wo + "`: the secret itself is not stored, so changing this number " +
				"is what makes a new build with a changed secret.",
			Optional:   true,
			Validators: []validator.Int64{int64validator.AlsoRequires(sibling(wo))},
		}
	}
	return attrs
}

// buildSpec turns the configuration into the build templatebuild plans and runs. known
// is false when a value it needs is not known yet (the plan then leaves the hashes
// unknown).
func buildSpec(ctx context.Context, m *templateBuildModel) (spec templatebuild.Spec, known bool, diags diag.Diagnostics) {
	for _, v := range []attr.Value{m.FromImage, m.FromTemplate, m.Dockerfile, m.BuildArgs, m.Context, m.Steps, m.StartCmd, m.ReadyCmd} {
		if v.IsUnknown() {
			return spec, false, nil
		}
	}
	spec = templatebuild.Spec{
		TemplateID: m.TemplateID.ValueString(), FromImage: m.FromImage.ValueString(), FromTemplate: m.FromTemplate.ValueString(),
		Dockerfile: m.Dockerfile.ValueString(), Context: m.Context.ValueString(), StartCmd: m.StartCmd.ValueString(),
		ReadyCmd: m.ReadyCmd.ValueString(), Force: m.Force.ValueBool(), HashMode: m.FilesHash.ValueString(),
		CPUCount: optionalInt32(m.CPUCount), MemoryMB: optionalInt32(m.MemoryMB), Reuse: m.Reuse.ValueBool(),
	}
	if fullyKnown(ctx, m.Triggers) {
		// Unknown triggers leave the spec hash unknown (ModifyPlan), not the copy hashes.
		diags.Append(m.Triggers.ElementsAs(ctx, &spec.Triggers, false)...)
	}
	if reg := m.FromImageRegistry; reg != nil {
		spec.FromImageRegistry = &e2b.FromImageRegistry{
			Type: reg.Type.ValueString(), Username: reg.Username.ValueString(), Password: reg.Password.ValueString(),
			AWSAccessKeyID: reg.AWSAccessKeyID.ValueString(), AWSSecretAccessKey: reg.AWSSecretAccessKey.ValueString(),
			AWSRegion: reg.AWSRegion.ValueString(), ServiceAccountJSON: reg.ServiceAccountJSON.ValueString(),
		}
	}
	diags.Append(m.Tags.ElementsAs(ctx, &spec.Tags, false)...)
	if d := m.BuildArgs.ElementsAs(ctx, &spec.BuildArgs, false); d.HasError() {
		return spec, false, nil // a value not known yet
	}
	if m.Steps.IsNull() {
		return spec, true, diags
	}
	var models []stepModel
	if d := m.Steps.ElementsAs(ctx, &models, false); d.HasError() {
		// An element not known yet (a whole step from another resource).
		return spec, false, nil
	}
	for i, s := range models {
		step, known, err := stepFromModel(ctx, s)
		if !known {
			return spec, false, nil
		}
		if err != nil {
			diags.AddAttributeError(path.Root("steps").AtListIndex(i), "Invalid build step", fmt.Sprintf("Step %d: %v", i+1, err))
			continue
		}
		spec.Steps = append(spec.Steps, step)
	}
	return spec, true, diags
}

// addWriteOnlySecrets puts the write-only secrets of from_image_registry into reg (nil
// without a registry). They are in the configuration only: kept out of the model, which
// becomes the state also when the apply fails.
func addWriteOnlySecrets(ctx context.Context, config tfsdk.Config, reg *e2b.FromImageRegistry) diag.Diagnostics {
	if reg == nil {
		return nil
	}
	var m *registryModel
	diags := config.GetAttribute(ctx, path.Root("from_image_registry"), &m)
	if m == nil {
		return diags
	}
	for _, s := range []struct {
		wo   types.String
		into *string
	}{{m.PasswordWO, &reg.Password}, {m.AWSSecretAccessKeyWO, &reg.AWSSecretAccessKey}, {m.ServiceAccountJSONWO, &reg.ServiceAccountJSON}} {
		if !s.wo.IsNull() {
			*s.into = s.wo.ValueString()
		}
	}
	return diags
}

// stepFromModel converts one configured step; known is false when one of its values is
// not known yet.
func stepFromModel(ctx context.Context, s stepModel) (step templatebuild.Step, known bool, err error) {
	switch {
	case s.Run != nil:
		if s.Run.Command.IsUnknown() || s.Run.Commands.IsUnknown() || s.Run.User.IsUnknown() {
			return step, false, nil
		}
		command := s.Run.Command.ValueString()
		if !s.Run.Commands.IsNull() {
			var commands []types.String
			if d := s.Run.Commands.ElementsAs(ctx, &commands, false); d.HasError() {
				return step, false, nil
			}
			parts := make([]string, len(commands))
			for i, c := range commands {
				if c.IsUnknown() {
					return step, false, nil
				}
				parts[i] = c.ValueString()
			}
			// As the SDK's runCmd([...]).
			command = strings.Join(parts, " && ")
		}
		step.Step = steps.NewRun(steps.RunArgs{Command: command, User: s.Run.User.ValueString()})
	case s.Copy != nil:
		c := s.Copy
		for _, v := range []attr.Value{c.Src, c.Dest, c.User, c.Mode, c.ResolveSymlinks, c.ForceUpload} {
			if v.IsUnknown() {
				return step, false, nil
			}
		}
		mode := c.Mode.ValueString()
		if len(mode) == 3 {
			mode = "0" + mode
		}
		step.Step = steps.NewCopy(steps.CopyArgs{Src: c.Src.ValueString(), Dest: c.Dest.ValueString(), User: c.User.ValueString(), Mode: mode})
		step.ResolveSymlinks = c.ResolveSymlinks.ValueBool()
		step.ForceUpload = c.ForceUpload.ValueBool()
	case !s.Env.IsNull():
		if s.Env.IsUnknown() {
			return step, false, nil
		}
		var env map[string]types.String
		if d := s.Env.ElementsAs(ctx, &env, false); d.HasError() {
			return step, false, nil
		}
		keys := make([]string, 0, len(env))
		for k, v := range env {
			if v.IsUnknown() {
				return step, false, nil
			}
			keys = append(keys, k)
		}
		if len(keys) == 0 {
			return step, true, errors.New("env is empty")
		}
		sort.Strings(keys)
		vars := make([]steps.EnvVar, len(keys))
		for i, k := range keys {
			vars[i] = steps.EnvVar{Key: k, Value: env[k].ValueString()}
		}
		step.Step = steps.NewEnv(vars...)
	case !s.Workdir.IsNull():
		if s.Workdir.IsUnknown() {
			return step, false, nil
		}
		step.Step = steps.NewWorkdir(s.Workdir.ValueString())
	case !s.User.IsNull():
		if s.User.IsUnknown() {
			return step, false, nil
		}
		step.Step = steps.NewUser(s.User.ValueString())
	default:
		return step, true, errors.New("sets none of run, copy, env, workdir and user")
	}
	if s.SkipCache.IsUnknown() {
		return step, false, nil
	}
	step.Force = s.SkipCache.ValueBool()
	return step, true, nil
}

// planBuild plans the build the model configures: nil when a value is not known yet.
func planBuild(ctx context.Context, m *templateBuildModel, diags *diag.Diagnostics) *templatebuild.Build {
	spec, known, d := buildSpec(ctx, m)
	diags.Append(d...)
	if !known || diags.HasError() {
		return nil
	}
	b, err := templatebuild.Plan(ctx, spec, tflogLogger{})
	addIssues(diags, err)
	if b != nil {
		for _, w := range b.Warnings {
			diags.AddAttributeWarning(path.Root("dockerfile"), "Dockerfile instruction ignored", w)
		}
	}
	return b
}

// addIssues reports a *templatebuild.PlanError on the arguments at fault.
func addIssues(diags *diag.Diagnostics, err error) {
	var pe *templatebuild.PlanError
	switch {
	case err == nil:
	case errors.As(err, &pe):
		for _, is := range pe.Issues {
			if is.Field == "" {
				diags.AddError(is.Summary, is.Detail)
			} else {
				diags.AddAttributeError(path.Root(is.Field), is.Summary, is.Detail)
			}
		}
	default:
		diags.AddError("Planning the build", err.Error())
	}
}

// fullyKnown reports whether v and every value inside it are known.
func fullyKnown(ctx context.Context, v attr.Value) bool {
	tv, err := v.ToTerraformValue(ctx)
	return err == nil && tv.IsFullyKnown()
}

// optionalInt32 is v as the API's optional int32 (the schema bounds it).
func optionalInt32(v types.Int64) *int32 {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	n := int32(v.ValueInt64()) //nolint:gosec // validated to a small range by the schema
	return &n
}

// optionalString is v, null when empty.
func optionalString(v string) types.String {
	if v == "" {
		return types.StringNull()
	}
	return types.StringValue(v)
}
