package provider

// The glue between e2b_template_build and package templatebuild: the configuration
// as a templatebuild.Spec, and templatebuild's errors as diagnostics.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/templatebuild"
)

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
		spec.FromImageRegistry = &e2bapi.FromImageRegistry{
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
func addWriteOnlySecrets(ctx context.Context, config tfsdk.Config, reg *e2bapi.FromImageRegistry) diag.Diagnostics {
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

// runOptions logs every build log line and the run's progress with tflog.
func runOptions(ctx context.Context, timeout time.Duration, started func(string) error) templatebuild.Options {
	return templatebuild.Options{
		Timeout: timeout,
		Logger:  tflogLogger{},
		Started: func(buildID string) error {
			ctx = tflog.SetField(ctx, "build_id", buildID)
			if started == nil {
				return nil
			}
			return started(buildID)
		},
		OnLog: func(e e2bapi.BuildLogEntry, step string) {
			tflog.Info(ctx, "build log: "+e.Message, map[string]any{"step": e.Step, "level": e.Level, "step_description": step})
		},
	}
}

// addRunError reports the error of a Runner's Run, Wait or Tag. A build still running at
// the timeout is an error; the state keeps it with status "building" all the same.
func addRunError(diags *diag.Diagnostics, err error, templateID, buildID string) {
	var failed *templatebuild.FailedError
	var timeout *templatebuild.TimeoutError
	var runErr *templatebuild.Error
	switch {
	case err == nil:
	case errors.As(err, &failed):
		diags.AddError("Build failed", failed.Error())
	case errors.As(err, &timeout):
		// An error, so that a CI run fails rather than passing on an unfinished build.
		diags.AddError("Build still running",
			fmt.Sprintf("Build %s of template %s did not finish within the timeout (timeouts.create, or timeouts.update "+
				"when an earlier apply left it running); it goes on on the server. Run terraform apply again to wait "+
				"for it: the next apply takes this build, also when it shows the resource as tainted and to be "+
				"replaced, and waits for it instead of building the same inputs again. Raise the timeout to wait "+
				"longer in one apply.", buildID, templateID))
	case errors.As(err, &runErr) && runErr.Stage == templatebuild.StageTemplate:
		diags.AddAttributeError(path.Root("template_id"), "Reading template "+templateID, err.Error())
	case errors.As(err, &runErr) && runErr.Stage == templatebuild.StageReuse:
		diags.AddAttributeError(path.Root("reuse"), "Reusing a build of template "+templateID, err.Error())
	case errors.As(err, &runErr) && runErr.Stage == templatebuild.StageUpload:
		diags.AddError("Uploading the build context", err.Error())
	case errors.Is(err, templatebuild.ErrStartUnconfirmed):
		// Kept as building, not failed: a failed resource is tainted and built again.
		diags.AddWarning("Build start not confirmed",
			fmt.Sprintf("%v. The state records build %s of template %s with status \"building\": the next plan "+
				"refreshes it, keeps it if it started (and apply waits for it) and builds again if it did not.", err, buildID, templateID))
	case errors.As(err, &runErr) && runErr.Stage == templatebuild.StageStart:
		diags.AddError("Starting build of template "+templateID, err.Error())
	case errors.As(err, &runErr) && runErr.Stage == templatebuild.StageTags:
		diags.AddAttributeError(path.Root("tags"), "Tagging build "+buildID, err.Error())
	default:
		// A warning, as for the timeout: an error would taint the build the state keeps,
		// and the next apply would build again instead of refreshing it.
		diags.AddWarning("Build not followed to the end",
			fmt.Sprintf("Following build %s of template %s failed: %v. The build may go on: the state records it with "+
				"status \"building\"; the next plan refreshes its status, and apply waits for it again.", buildID, templateID, err))
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
