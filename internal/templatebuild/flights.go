package templatebuild

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

// flights are the builds a Runner started and follows, per template. E2B cancels a
// template's in-progress builds that share a tag with a build being started, and fails
// its waiting builds that share a tag with one being registered: two builds of one
// template in one apply (both without tags carry "default", like the waiting build the
// template was registered with) would cancel each other. A build therefore starts only
// when no build of the Runner it shares a tag with is in progress.
type flights struct {
	starts keyedLocks // one start at a time per template
	mu     sync.Mutex
	m      map[string][]*flight
}

// keyedLocks are locks by key.
type keyedLocks struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// lock takes the lock of key, waiting under ctx.
func (k *keyedLocks) lock(ctx context.Context, key string) (func(), error) {
	k.mu.Lock()
	l, ok := k.m[key]
	if !ok {
		if k.m == nil {
			k.m = map[string]chan struct{}{}
		}
		l = make(chan struct{}, 1)
		k.m[key] = l
	}
	k.mu.Unlock()
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// flight is a build in progress and the tags it carries as far as E2B's cancelling goes.
type flight struct {
	templateID, buildID string
	tags                []string
	done                chan struct{}
}

// sharing returns a build in progress of the template that carries one of tags, or nil.
func (f *flights) sharing(templateID string, tags []string) *flight {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range f.m[templateID] {
		if slices.ContainsFunc(tags, func(t string) bool { return slices.Contains(fl.tags, t) }) {
			return fl
		}
	}
	return nil
}

func (f *flights) add(templateID, buildID string, tags []string) *flight {
	fl := &flight{templateID: templateID, buildID: buildID, tags: tags, done: make(chan struct{})}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[templateID] = append(f.m[templateID], fl)
	return fl
}

// finish ends a flight (nil is none): the Runner no longer follows the build.
func (f *flights) finish(fl *flight) {
	if fl == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[fl.templateID] = slices.DeleteFunc(f.m[fl.templateID], func(o *flight) bool { return o == fl })
	close(fl.done)
}

// startAlone starts b once no build the Runner follows shares a tag with it (see
// flights). tpl is the template as read before; after waiting for another build it is
// read afresh, as that one may have taken the waiting build. The wait is bounded by
// waitCtx. The returned flight, when not nil, must be finished once the build is no
// longer followed.
func (r *Runner) startAlone(ctx, waitCtx context.Context, tpl *e2b.TemplateWithBuilds, b *Build, log e2bapi.Logger) (string, bool, *flight, error) {
	for {
		release, err := r.running.starts.lock(waitCtx, b.TemplateID)
		if err != nil {
			return "", false, nil, fmt.Errorf("waiting to start a build of template %s: %w", b.TemplateID, err)
		}
		if tpl == nil {
			if tpl, err = r.api.GetTemplate(ctx, b.TemplateID); err != nil {
				release()
				return "", false, nil, err
			}
		}
		tags := carriedTags(tpl, b)
		other := r.running.sharing(b.TemplateID, tags)
		if other == nil {
			buildID, onWaiting, err := start(ctx, r.api, tpl, b, log)
			var fl *flight
			if buildID != "" {
				fl = r.running.add(b.TemplateID, buildID, tags)
			}
			release()
			return buildID, onWaiting, fl, err
		}
		release()
		log.Info(ctx, "waiting for a build of the same template to end before starting: E2B would cancel it, as both carry a tag", map[string]any{
			"other_build_id": other.buildID, "tags": tags,
		})
		select {
		case <-other.done:
			tpl = nil
		case <-waitCtx.Done():
			return "", false, nil, fmt.Errorf("waiting for build %s of the same template to end: %w", other.buildID, waitCtx.Err())
		}
	}
}

// carriedTags are the tags the build start will carry for E2B's cancelling, taken
// broadly: the default tag of a waiting build it may run on, and the tags it is
// registered with otherwise (the default tag when it has none).
func carriedTags(tpl *e2b.TemplateWithBuilds, b *Build) []string {
	tags := slices.Clone(b.Tags)
	if len(tags) == 0 || slices.ContainsFunc(tpl.Builds, func(w e2b.TemplateBuild) bool { return w.Status == e2b.BuildWaiting }) {
		tags = append(tags, e2b.DefaultTag)
	}
	return tags
}
