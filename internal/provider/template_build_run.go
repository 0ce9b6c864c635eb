package provider

// A build run of e2b_template_build: what it takes instead of building (a build an
// earlier apply left running, a ready build with its spec hash), which the plan shows;
// the hooks that log it and save the build ID; its errors as diagnostics.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/templatebuild"
)

// planAdoption warns that apply takes the build an earlier apply left running with b's
// template and spec hash (its create timed out, so Terraform replaces the tainted
// resource) rather than building again.
func (r *templateBuildResource) planAdoption(b *templatebuild.Build, resp *resource.ModifyPlanResponse) {
	if r.data == nil {
		return
	}
	if buildID := r.data.leftRunning.peek(b.TemplateID, b.SpecHash); buildID != "" {
		resp.Diagnostics.AddAttributeWarning(path.Root("build_id"), "Adopting a build left running",
			fmt.Sprintf("Build %s of template %s, which an earlier apply left running when its timeout passed, has "+
				"this spec hash: apply replaces the tainted resource with one that waits for that build instead of "+
				"building again.", buildID, b.TemplateID))
	}
}

// planReuse plans the ready build that b would reuse, when there is one: its ID, known
// now, and a warning that says so. The lookup is the only API call of a plan; when it
// fails the build ID stays unknown and apply looks again.
func (r *templateBuildResource) planReuse(ctx context.Context, b *templatebuild.Build, resp *resource.ModifyPlanResponse) {
	if !b.Reuse || r.data == nil {
		return
	}
	runner, err := r.data.Runner()
	var buildID string
	if err == nil {
		buildID, err = runner.Reusable(r.data.logContext(ctx), b)
	}
	if err != nil {
		resp.Diagnostics.AddAttributeWarning(path.Root("reuse"), "Reusable build not looked up",
			fmt.Sprintf("Looking for a ready build of template %s with spec hash %s failed: %v. Apply looks again "+
				"and builds when there is none.", b.TemplateID, b.SpecHash, err))
		return
	}
	if buildID == "" {
		return
	}
	for name, v := range map[string]string{"id": buildID, "build_id": buildID, "status": e2b.BuildReady} {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root(name), v)...)
	}
	resp.Diagnostics.AddAttributeWarning(path.Root("build_id"), "Reusing build "+buildID,
		fmt.Sprintf("Build %s of template %s is ready and carries the tag %s (the same spec hash): apply adopts it "+
			"instead of building and gives it this resource's tags. Destroy will forget it and leave it in place.",
			buildID, b.TemplateID, templatebuild.SpecTag(b.SpecHash)))
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
		OnLog: func(e e2b.BuildLogEntry, step string) {
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
	var changed *templatebuild.PlanError
	switch {
	case err == nil:
	case errors.As(err, &changed):
		// COPY files changed since the plan, found as their archives were spooled.
		addIssues(diags, changed)
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
