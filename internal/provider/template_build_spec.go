package provider

// The configured build of e2b_template_build: the models of its steps and registry
// credentials, and the configuration as the templatebuild.Spec that package
// templatebuild plans, or resolves from the plan's hashes for an apply.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
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

// planBuild plans the build the model configures, hashing its COPY sources: nil when a
// value is not known yet.
func planBuild(ctx context.Context, m *templateBuildModel, diags *diag.Diagnostics) *templatebuild.Build {
	return resolveBuild(ctx, m, diags, func(spec templatebuild.Spec) (*templatebuild.Build, error) {
		return templatebuild.Plan(ctx, spec, tflogLogger{})
	})
}

// applyBuild is the build an apply runs: the one the plan showed, from its copy_hashes
// (templatebuild.Planned walks no context: the upload's walk checks the files against
// them), or planned now when the plan could not hash the files.
func applyBuild(ctx context.Context, m *templateBuildModel, diags *diag.Diagnostics) *templatebuild.Build {
	if m.CopyHashes.IsUnknown() || m.CopyHashes.IsNull() {
		return planBuild(ctx, m, diags)
	}
	var hashes []string
	diags.Append(m.CopyHashes.ElementsAs(ctx, &hashes, false)...)
	return resolveBuild(ctx, m, diags, func(spec templatebuild.Spec) (*templatebuild.Build, error) {
		return templatebuild.Planned(ctx, spec, hashes, tflogLogger{})
	})
}

// resolveBuild resolves the build the model configures with resolve: nil when a value is
// not known yet.
func resolveBuild(ctx context.Context, m *templateBuildModel, diags *diag.Diagnostics,
	resolve func(templatebuild.Spec) (*templatebuild.Build, error),
) *templatebuild.Build {
	spec, known, d := buildSpec(ctx, m)
	diags.Append(d...)
	if !known || diags.HasError() {
		return nil
	}
	b, err := resolve(spec)
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
