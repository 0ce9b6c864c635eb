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

// start starts the build of tpl. When the template has a waiting build (the one E2B
// registers with a template) with the same resources, the build runs on it, so that one
// does not wait forever: it carries the default tag, and onWaiting is true so that it
// gets b.Tags once ready. Otherwise a new build is registered with b.Tags, plus the
// default tag when a waiting build is there: E2B then marks the waiting one superseded.
// A build registered anew with reuse carries its spec tag while it runs: another
// process's run of the same spec finds it in the tag list and waits for it (reuse)
// instead of building again and cancelling it. One with reuse that runs on the waiting
// build (the template's first) gets its spec tag only once ready, as E2B moves tags to
// ready builds only: until then another process's run of the same spec does not see it.
func start(ctx context.Context, api *e2bapi.Client, tpl *e2b.TemplateWithBuilds, b *Build, log e2bapi.Logger) (buildID string, onWaiting bool, err error) {
	waiting := false
	for _, w := range tpl.Builds {
		if w.Status != e2b.BuildWaiting {
			continue
		}
		waiting = true
		if (b.CPUCount != nil && w.CPUCount != *b.CPUCount) || (b.MemoryMB != nil && w.MemoryMB != *b.MemoryMB) {
			continue
		}
		err := startKnown(ctx, api, tpl.TemplateID, w.BuildID, b.Start, log)
		if err == nil {
			log.Info(ctx, "build started on the template's waiting build", map[string]any{"build_id": w.BuildID})
			return w.BuildID, true, nil
		}
		if errors.Is(err, ErrStartUnconfirmed) {
			return w.BuildID, true, err
		}
		// Another apply may have taken it in the meantime.
		if !e2bapi.IsInvalid(err) {
			return "", false, err
		}
		log.Debug(ctx, "waiting build not usable", map[string]any{"build_id": w.BuildID, "error": err.Error()})
	}
	name := templateName(tpl)
	tags := b.Tags
	if waiting && len(tags) > 0 && !slices.Contains(tags, e2b.DefaultTag) {
		tags = append(slices.Clone(tags), e2b.DefaultTag)
	}
	out, err := api.CreateTemplateBuild(ctx, e2b.TemplateBuildRequestV3{Name: name, Tags: tags, CPUCount: b.CPUCount, MemoryMB: b.MemoryMB})
	if err != nil {
		return "", false, err
	}
	if out.TemplateID != tpl.TemplateID {
		return "", false, fmt.Errorf("registering a build under the name %q gave template %s, not %s", name, out.TemplateID, tpl.TemplateID)
	}
	if err := startKnown(ctx, api, tpl.TemplateID, out.BuildID, b.Start, log); err != nil {
		if errors.Is(err, ErrStartUnconfirmed) {
			return out.BuildID, false, err
		}
		return "", false, err
	}
	log.Info(ctx, "build started", map[string]any{"build_id": out.BuildID})
	return out.BuildID, false, nil
}

// ErrStartUnconfirmed is a start of a known build whose answer was lost and whose status
// could not be read either: the build may be running.
var ErrStartUnconfirmed = errors.New("the build may have started")

// startKnown starts the registered build buildID. The build ID is known before the start,
// so a start without the server's answer (lost on the way back, or a 5xx from a proxy)
// is checked against the build's status before it counts: a build no longer waiting did
// start. When the status
// cannot be read either, the error wraps ErrStartUnconfirmed.
func startKnown(ctx context.Context, api *e2bapi.Client, templateID, buildID string, req e2b.TemplateBuildStartV2, log e2bapi.Logger) error {
	err := api.StartBuild(ctx, templateID, buildID, req)
	var apiErr *e2bapi.APIError
	if err == nil || ctx.Err() != nil || (errors.As(err, &apiErr) && apiErr.StatusCode < 500) {
		// No error, or the server's own answer: a refusal is one, whatever the
		// build's status (another apply may have started it).
		return err
	}
	info, statusErr := api.GetBuildStatus(ctx, templateID, buildID, math.MaxInt32)
	switch {
	case statusErr != nil:
		return fmt.Errorf("starting build %s: %w; reading its status: %w (%w)", buildID, err, statusErr, ErrStartUnconfirmed)
	case info.Status == e2b.BuildWaiting:
		return err
	}
	log.Warn(ctx, "the answer to the build start was lost, but the build started", map[string]any{
		"build_id": buildID, "status": info.Status, "error": err.Error(),
	})
	return nil
}
