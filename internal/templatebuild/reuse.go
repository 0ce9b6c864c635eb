package templatebuild

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

// Reusable returns the ID of a ready build of b's template that carries b's spec tag, or
// "" when there is none or b is not to reuse one (Spec.Reuse off, or a forced build,
// which is meant to run).
func (r *Runner) Reusable(ctx context.Context, b *Build) (string, error) {
	buildID, status, err := specTagged(ctx, r.api, b)
	if status != e2b.BuildReady {
		return "", err
	}
	return buildID, nil
}

// reuse takes, for b, the ready build planned (when not empty) or else the one its spec tag
// points at now, and points b's tags at it, as a new build would take them. A build of the
// spec that another run is building is waited for (under waitCtx) rather than cancelled by
// a build sharing its tag. reused is false when there is no build to reuse: b is then to
// be built.
func (r *Runner) reuse(ctx, waitCtx context.Context, b *Build, tpl *e2b.TemplateWithBuilds, planned string, log e2bapi.Logger) (res Result, reused bool, err error) {
	if !b.reuses() {
		return Result{}, false, nil
	}
	buildID := planned
	if planned == "" {
		var status string
		if buildID, status, err = specTagged(ctx, r.api, b); err != nil {
			return Result{}, false, &Error{StageReuse, err}
		}
		if status == e2b.BuildBuilding {
			log.Info(ctx, "waiting for a build of the same spec hash that another run started, to reuse it", map[string]any{"build_id": buildID})
			var failed *FailedError
			status, err = r.wait(ctx, waitCtx, b.TemplateID, buildID, nil, nil, templateName(tpl), Options{})
			if errors.As(err, &failed) {
				err = nil // built below instead
			}
			if err != nil {
				// It goes on (a timeout) or could not be followed: kept as building, as
				// a build of this run would be.
				return Result{BuildID: buildID, Status: status}, true, err
			}
		}
		if status != e2b.BuildReady {
			return Result{}, false, nil
		}
	} else if ready, err := isReady(ctx, r.api, b.TemplateID, planned); err != nil {
		return Result{}, false, &Error{StageReuse, err}
	} else if !ready {
		// Building now would contradict the plan, which showed this build ID.
		return Result{}, false, &Error{StageReuse, fmt.Errorf("build %s of template %s, which the plan reuses, "+
			"is no longer a ready build; run terraform plan again", planned, b.TemplateID)}
	}
	res = Result{BuildID: buildID, Status: e2b.BuildReady}
	if _, err := r.api.AssignTags(ctx, templateName(tpl)+":"+buildID, b.Tags); err != nil {
		return res, true, &Error{StageTags, err}
	}
	log.Info(ctx, "reused a ready build with the same spec hash instead of building", map[string]any{
		"build_id": buildID, "spec_hash": b.SpecHash,
	})
	return res, true, nil
}

// specTagged returns the build b's spec tag points at and its status; none ("", "") when
// no build carries it or b is not to reuse one. E2B lists a tag's newest assignment
// whatever its build's status; the local server lists only tags of ready builds.
func specTagged(ctx context.Context, api *e2bapi.Client, b *Build) (buildID, status string, err error) {
	if !b.reuses() {
		return "", "", nil
	}
	tags, err := api.ListTags(ctx, b.TemplateID)
	if err != nil {
		return "", "", err
	}
	tag := SpecTag(b.SpecHash)
	i := slices.IndexFunc(tags, func(t e2b.TemplateTag) bool { return t.Tag == tag })
	if i < 0 {
		return "", "", nil
	}
	info, err := api.GetBuildStatus(ctx, b.TemplateID, tags[i].BuildID, math.MaxInt32)
	if e2bapi.IsBuildGone(err) {
		return "", "", nil
	}
	if err != nil {
		return "", "", err
	}
	return tags[i].BuildID, info.Status, nil
}

// reuses reports whether b may take a build instead of building: a forced build, or one
// with a forced step (the cache skipped from there on), is meant to run.
func (b *Build) reuses() bool {
	return b.Reuse && !b.Start.Force && !slices.ContainsFunc(b.Start.Steps, func(s e2b.TemplateStep) bool { return s.Force })
}

// isReady reports whether the build exists and is ready.
func isReady(ctx context.Context, api *e2bapi.Client, templateID, buildID string) (bool, error) {
	info, err := api.GetBuildStatus(ctx, templateID, buildID, math.MaxInt32)
	if e2bapi.IsBuildGone(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return info.Status == e2b.BuildReady, nil
}
