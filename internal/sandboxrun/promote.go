package sandboxrun

import (
	"context"
	"fmt"
	"math"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	envd "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
)

// PromoteRequest is a tag to move to a build (e2b_alias), after an optional gate.
type PromoteRequest struct {
	// Template is the template as the caller names it (a name or an ID), TemplateID
	// the ID it resolves to.
	Template, TemplateID string
	Tag                  string
	BuildID              string
	// Gate, when not nil, runs in a new sandbox from the build before the tag moves;
	// a zero Timeout is DefaultTimeout.
	Gate *envd.RunRequest
}

// The stages of a promotion; a gate that cannot run fails in the stages of Run.
const (
	StageBuild Stage = "build" // checking that the build exists and is ready
	StageGate  Stage = "gate"  // the gate exited with a non-zero code
	StageMove  Stage = "move"  // moving the tag
)

// Promote moves req.Tag to req.BuildID once the build is ready and the gate, if any,
// exited 0: sandboxes started from name:tag from then on run the build. On any error the
// tag stays where it was. The result is the gate's run (empty without a gate), never nil;
// errors are *Error.
func Promote(ctx context.Context, api *e2bapi.Client, req PromoteRequest, opts Options) (*Result, error) {
	res := &Result{}
	notMoved := fmt.Sprintf("the tag %q was not moved", req.Tag)
	info, err := api.GetBuildStatus(ctx, req.TemplateID, req.BuildID, math.MaxInt32)
	switch {
	case e2bapi.IsBuildGone(err):
		return res, &Error{Stage: StageBuild, Err: err,
			msg: fmt.Sprintf("Template %s has no build %s; %s.", req.Template, req.BuildID, notMoved)}
	case err != nil:
		return res, &Error{Stage: StageBuild, Err: err}
	case info.Status != e2b.BuildReady:
		return res, &Error{Stage: StageBuild, Err: fmt.Errorf("build %s is %s", req.BuildID, info.Status),
			msg: fmt.Sprintf("Build %s of template %s is %q, not ready; %s. Sandboxes cannot start from a build that is not ready.",
				req.BuildID, req.Template, info.Status, notMoved)}
	}
	if req.Gate != nil {
		run := Request{Template: req.Template + ":" + req.BuildID, Run: *req.Gate}
		res, err = Run(ctx, api, run, opts)
		if err != nil {
			return res, err
		}
		if res.Output.ExitCode != 0 {
			return res, &Error{Stage: StageGate, SandboxID: res.SandboxID, Err: fmt.Errorf("gate exited with code %d", res.Output.ExitCode),
				msg: ExitMessage(run, res, fmt.Sprintf("The gate of build %s failed: %s.", req.BuildID, notMoved))}
		}
	}
	out, err := api.AssignTags(ctx, req.Template+":"+req.BuildID, []string{req.Tag})
	if err != nil {
		return res, &Error{Stage: StageMove, Err: err}
	}
	opts.logger().Info(ctx, "tag moved", map[string]any{"template": req.Template, "tag": req.Tag, "build_id": out.BuildID})
	return res, nil
}
