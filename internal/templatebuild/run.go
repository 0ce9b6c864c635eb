// Package templatebuild is the use case of one template build on E2B (the cloud,
// self-hosted E2B or the local server): Plan resolves a configured build (its Dockerfile,
// its context, the listing and files hash of every COPY source) without calling the API;
// Run uploads the archives the server lacks, registers and starts the build, follows it to
// the end and says why it failed; Wait follows a build an earlier run left going. It knows
// nothing of Terraform; the provider turns its results into state and diagnostics.
package templatebuild

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

// uploadParallelism bounds the archives spooled and uploaded at once: each holds a
// temporary file and a connection.
const uploadParallelism = 4

// Options are the hooks and limits of Run and Wait.
type Options struct {
	// Timeout bounds the upload and the wait for the build (none when zero). When it
	// passes while the build runs, the build goes on and the error is a *TimeoutError.
	Timeout time.Duration
	// Started is called once the build is started, before waiting for it: the caller
	// records the build ID there, so that a run that stops now still tracks the build. An
	// error stops Run, which returns it unchanged.
	Started func(buildID string) error
	// OnLog receives every build log line once, in order, with a description of its
	// step such as "step 2 (RUN make)".
	OnLog func(line e2bapi.BuildLogEntry, step string)
	// Logger receives the progress messages (uploads, start); may be nil.
	Logger e2bapi.Logger
	// Reuse is the build the plan reuses (Reusable), if any: Run takes exactly that one.
	Reuse string
}

// Result is what a run left: the build's ID and status (BuildReady; BuildBuilding when
// the wait stopped first; BuildError for a failed build). BuildID is empty when the build
// was never started.
type Result struct {
	BuildID string
	Status  string
}

// Stage is the part of a run an *Error happened in.
type Stage string

// The stages of a run.
const (
	StageTemplate Stage = "template" // reading the template
	StageReuse    Stage = "reuse"    // finding or checking the build to reuse
	StageUpload   Stage = "upload"   // uploading the build context
	StageStart    Stage = "start"    // registering and starting the build
	StageFollow   Stage = "follow"   // following the build (it may go on)
	StageTags     Stage = "tags"     // giving the ready build its tags
)

// Error is a run that failed in one stage for a reason other than the build's own
// failure (a *FailedError) or the timeout (a *TimeoutError).
type Error struct {
	Stage Stage
	Err   error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// TimeoutError is a wait that ended at Options.Timeout while the build runs on.
type TimeoutError struct {
	TemplateID, BuildID string
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("build %s of template %s did not finish within the timeout; it goes on", e.BuildID, e.TemplateID)
}

// Run runs the build b: it uploads the COPY archives the server does not have, starts the
// build, calls opts.Started, and waits for the build to end. It fails with an *Error, a
// *FailedError (the build failed) or a *TimeoutError (the build goes on); Result says
// what became of the build in every case. A build with Reuse instead takes a ready build
// that carries its spec tag, when there is one, and gives it b's tags.
func Run(ctx context.Context, api *e2bapi.Client, b *Build, opts Options) (Result, error) {
	log := logger(opts)
	waitCtx, cancel := withTimeout(ctx, opts.Timeout)
	defer cancel()
	if b.reuses() {
		unlock, err := sameSpec.lock(waitCtx, b.TemplateID+"/"+b.SpecHash)
		if err != nil {
			return Result{}, &Error{StageReuse, fmt.Errorf("waiting for a build of the same spec hash to end: %w", err)}
		}
		defer unlock()
	}
	if res, reused, err := reuse(ctx, waitCtx, api, b, opts.Reuse, log); reused || err != nil {
		return res, err
	}
	// Read first to fail early on a wrong template; startAlone reads it again.
	tpl, err := api.GetTemplate(ctx, b.TemplateID)
	if err != nil {
		return Result{}, &Error{StageTemplate, err}
	}
	if err := uploadMissing(waitCtx, api, b.TemplateID, b.Copies, log); err != nil {
		return Result{}, &Error{StageUpload, err}
	}
	buildID, onWaiting, fl, err := startAlone(ctx, waitCtx, api, b, log)
	defer running.finish(fl)
	unconfirmed := errors.Is(err, ErrStartUnconfirmed) && buildID != ""
	if err != nil && !unconfirmed {
		return Result{}, &Error{StageStart, err}
	}
	if opts.Started != nil {
		if err := opts.Started(buildID); err != nil {
			return Result{BuildID: buildID, Status: e2bapi.BuildBuilding}, err
		}
	}
	if err != nil {
		// The build may be running: the caller keeps it as building, and whoever looks
		// at it next finds out (a build still waiting was never started).
		return Result{BuildID: buildID, Status: e2bapi.BuildBuilding}, &Error{StageStart, err}
	}
	// A build registered anew got its tags then; one started on the waiting build only
	// carries the default tag until it is ready.
	var tags []string
	if onWaiting {
		tags = b.Tags
	}
	status, err := wait(ctx, waitCtx, api, b.TemplateID, buildID, b.Start.Steps, tags, templateName(tpl), opts)
	return Result{BuildID: buildID, Status: status}, err
}

// reuse takes, for b, the ready build planned (when not empty) or else the one its spec tag
// points at now, and points b's tags at it, as a new build would take them. A build of the
// spec that another run is building is waited for (under waitCtx) rather than cancelled by
// a build sharing its tag. reused is false when there is no build to reuse: b is then to
// be built.
func reuse(ctx, waitCtx context.Context, api *e2bapi.Client, b *Build, planned string, log e2bapi.Logger) (res Result, reused bool, err error) {
	if !b.reuses() {
		return Result{}, false, nil
	}
	tpl, err := api.GetTemplate(ctx, b.TemplateID)
	if err != nil {
		return Result{}, false, &Error{StageTemplate, err}
	}
	buildID := planned
	if planned == "" {
		var status string
		if buildID, status, err = specTagged(ctx, api, b); err != nil {
			return Result{}, false, &Error{StageReuse, err}
		}
		if status == e2bapi.BuildBuilding {
			log.Info(ctx, "waiting for a build of the same spec hash that another run started, to reuse it", map[string]any{"build_id": buildID})
			var failed *FailedError
			status, err = wait(ctx, waitCtx, api, b.TemplateID, buildID, nil, nil, templateName(tpl), Options{})
			if errors.As(err, &failed) {
				err = nil // built below instead
			}
			if err != nil {
				// It goes on (a timeout) or could not be followed: kept as building, as
				// a build of this run would be.
				return Result{BuildID: buildID, Status: status}, true, err
			}
		}
		if status != e2bapi.BuildReady {
			return Result{}, false, nil
		}
	} else if ready, err := isReady(ctx, api, b.TemplateID, planned); err != nil {
		return Result{}, false, &Error{StageReuse, err}
	} else if !ready {
		// Building now would contradict the plan, which showed this build ID.
		return Result{}, false, &Error{StageReuse, fmt.Errorf("build %s of template %s, which the plan reuses, "+
			"is no longer a ready build; run terraform plan again", planned, b.TemplateID)}
	}
	res = Result{BuildID: buildID, Status: e2bapi.BuildReady}
	if _, err := api.AssignTags(ctx, templateName(tpl)+":"+buildID, b.Tags); err != nil {
		return res, true, &Error{StageTags, err}
	}
	log.Info(ctx, "reused a ready build with the same spec hash instead of building", map[string]any{
		"build_id": buildID, "spec_hash": b.SpecHash,
	})
	return res, true, nil
}

// wrapStage is err as an *Error of stage, nil for nil.
func wrapStage(stage Stage, err error) error {
	if err == nil {
		return nil
	}
	return &Error{stage, err}
}

// Wait waits for a build an earlier run left going (Run's *TimeoutError) and, once it is
// ready, gives it those of tags no build holds yet. Meanwhile Run starts no build of the
// template sharing a tag with it (see running). It returns the build's status and
// fails like Run. Log lines name step numbers only: the steps are not known here.
func Wait(ctx context.Context, api *e2bapi.Client, templateID, buildID string, tags []string, opts Options) (string, error) {
	waitCtx, cancel := withTimeout(ctx, opts.Timeout)
	defer cancel()
	// Followed again: a build started meanwhile must not cancel it. Its tags at the
	// start are not known here; the default tag and tags cover every case.
	defer running.finish(running.add(templateID, buildID, append(slices.Clone(tags), e2bapi.DefaultTag)))
	return wait(ctx, waitCtx, api, templateID, buildID, nil, tags, "", opts)
}

// wait follows the build under waitCtx, then tags it. name is the template's name when
// known (else it is read when a tag is missing).
func wait(ctx, waitCtx context.Context, api *e2bapi.Client, templateID, buildID string, buildSteps []e2bapi.TemplateStep, tags []string, name string, opts Options) (string, error) {
	info, err := defaultPoller.follow(waitCtx, api, templateID, buildID, buildSteps, opts.OnLog)
	var failed *FailedError
	switch {
	case errors.As(err, &failed):
		return e2bapi.BuildError, err
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return e2bapi.BuildBuilding, &TimeoutError{TemplateID: templateID, BuildID: buildID}
	case err != nil:
		return e2bapi.BuildBuilding, &Error{StageFollow, err}
	}
	if info.Status == e2bapi.BuildReady {
		if err := assignMissingTags(ctx, api, templateID, buildID, name, tags); err != nil {
			return info.Status, &Error{StageTags, err}
		}
	}
	return info.Status, nil
}

func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

type noopLogger struct{}

func (noopLogger) Debug(context.Context, string, map[string]any) {}
func (noopLogger) Info(context.Context, string, map[string]any)  {}
func (noopLogger) Warn(context.Context, string, map[string]any)  {}

func logger(opts Options) e2bapi.Logger {
	if opts.Logger == nil {
		return noopLogger{}
	}
	return opts.Logger
}

// uploadMissing asks the server for every archive and uploads those it does not have, or
// whose step forces the upload, a few at a time; an archive shared by several steps is
// asked for once. Each is spooled to a temporary file (every file checked against the
// digest the hash used) and streamed from there.
func uploadMissing(ctx context.Context, api *e2bapi.Client, templateID string, copies []Copy, log e2bapi.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, uploadParallelism)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	var unique []Copy
	at := map[string]int{}
	for _, c := range copies {
		if i, ok := at[c.Hash]; ok {
			unique[i].forceUpload = unique[i].forceUpload || c.forceUpload
			continue
		}
		at[c.Hash] = len(unique)
		unique = append(unique, c)
	}
	for _, c := range unique {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := uploadOne(ctx, api, templateID, c, log); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", c.Name(), err))
				mu.Unlock()
				cancel()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func uploadOne(ctx context.Context, api *e2bapi.Client, templateID string, c Copy, log e2bapi.Logger) error {
	link, err := api.GetFileUploadLink(ctx, templateID, c.Hash)
	if err != nil {
		return err
	}
	if link.Present && !c.forceUpload {
		log.Info(ctx, "build context already uploaded", map[string]any{"files_hash": c.Hash})
		return nil
	}
	if link.URL == "" {
		return fmt.Errorf("E2B has no archive with files hash %s and gave no upload URL", c.Hash)
	}
	started := time.Now()
	name, size, err := c.spoolArchive(ctx)
	if err != nil {
		return err
	}
	defer os.Remove(name)
	f, err := os.Open(name) //nolint:gosec // G703: the temporary file spoolArchive just created, not a path from the configuration
	if err != nil {
		return err
	}
	defer f.Close()
	if err := api.UploadArchive(ctx, link, f, size); err != nil {
		return err
	}
	log.Info(ctx, "build context uploaded", map[string]any{
		"files_hash": c.Hash, "bytes": size, "duration_ms": time.Since(started).Milliseconds(),
	})
	return nil
}

// running are the builds this process started and follows, per template. E2B cancels a
// template's in-progress builds that share a tag with a build being started, and fails
// its waiting builds that share a tag with one being registered: two builds of one
// template in one apply (both without tags carry "default", like the waiting build the
// template was registered with) would cancel each other. A build therefore starts only
// when no build of this process it shares a tag with is in progress.
var running = &flights{m: map[string][]*flight{}}

type flights struct {
	starts keyedLocks // one start at a time per template
	mu     sync.Mutex
	m      map[string][]*flight
}

// sameSpec makes the runs of one template and spec hash with reuse in this process go one
// after the other, so that the later ones reuse the first build instead of building it
// again (the plan found none, as neither had run).
var sameSpec = &keyedLocks{}

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

// finish ends a flight (nil is none): this process no longer follows the build.
func (f *flights) finish(fl *flight) {
	if fl == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[fl.templateID] = slices.DeleteFunc(f.m[fl.templateID], func(o *flight) bool { return o == fl })
	close(fl.done)
}

// startAlone starts b once no build this process follows shares a tag with it (see
// running), reading the template afresh each time: the waiting build may have been taken
// meanwhile. The wait is bounded by waitCtx. The returned flight, when not nil, must be
// finished once the build is no longer followed.
func startAlone(ctx, waitCtx context.Context, api *e2bapi.Client, b *Build, log e2bapi.Logger) (string, bool, *flight, error) {
	for {
		release, err := running.starts.lock(waitCtx, b.TemplateID)
		if err != nil {
			return "", false, nil, fmt.Errorf("waiting to start a build of template %s: %w", b.TemplateID, err)
		}
		tpl, err := api.GetTemplate(ctx, b.TemplateID)
		if err != nil {
			release()
			return "", false, nil, err
		}
		tags := carriedTags(tpl, b)
		other := running.sharing(b.TemplateID, tags)
		if other == nil {
			buildID, onWaiting, err := start(ctx, api, tpl, b, log)
			var fl *flight
			if buildID != "" {
				fl = running.add(b.TemplateID, buildID, tags)
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
		case <-waitCtx.Done():
			return "", false, nil, fmt.Errorf("waiting for build %s of the same template to end: %w", other.buildID, waitCtx.Err())
		}
	}
}

// carriedTags are the tags the build start will carry for E2B's cancelling, taken
// broadly: the default tag of a waiting build it may run on, and the tags it is
// registered with otherwise (the default tag when it has none).
func carriedTags(tpl *e2bapi.TemplateWithBuilds, b *Build) []string {
	tags := slices.Clone(b.Tags)
	if len(tags) == 0 || slices.ContainsFunc(tpl.Builds, func(w e2bapi.TemplateBuild) bool { return w.Status == e2bapi.BuildWaiting }) {
		tags = append(tags, e2bapi.DefaultTag)
	}
	return tags
}

// start starts the build of tpl. When the template has a waiting build (the one E2B
// registers with a template) with the same resources, the build runs on it, so that one
// does not wait forever: it carries the default tag, and onWaiting is true so that it
// gets b.Tags once ready. Otherwise a new build is registered with b.Tags, plus the
// default tag when a waiting build is there: E2B then marks the waiting one superseded.
// A build with reuse is always registered anew, so that it carries its spec tag while it
// runs: another process's run of the same spec finds it in the tag list and waits for it
// (reuse) instead of building again and cancelling it.
func start(ctx context.Context, api *e2bapi.Client, tpl *e2bapi.TemplateWithBuilds, b *Build, log e2bapi.Logger) (buildID string, onWaiting bool, err error) {
	waiting := false
	for _, w := range tpl.Builds {
		if w.Status != e2bapi.BuildWaiting {
			continue
		}
		waiting = true
		if b.reuses() || (b.CPUCount != nil && w.CPUCount != *b.CPUCount) || (b.MemoryMB != nil && w.MemoryMB != *b.MemoryMB) {
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
	if waiting && len(tags) > 0 && !slices.Contains(tags, e2bapi.DefaultTag) {
		tags = append(slices.Clone(tags), e2bapi.DefaultTag)
	}
	out, err := api.CreateTemplateBuild(ctx, e2bapi.TemplateBuildRequestV3{Name: name, Tags: tags, CPUCount: b.CPUCount, MemoryMB: b.MemoryMB})
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
func startKnown(ctx context.Context, api *e2bapi.Client, templateID, buildID string, req e2bapi.TemplateBuildStartV2, log e2bapi.Logger) error {
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
	case info.Status == e2bapi.BuildWaiting:
		return err
	}
	log.Warn(ctx, "the answer to the build start was lost, but the build started", map[string]any{
		"build_id": buildID, "status": info.Status, "error": err.Error(),
	})
	return nil
}

// templateName is the name builds of tpl are registered and tagged under.
func templateName(tpl *e2bapi.TemplateWithBuilds) string {
	switch {
	case len(tpl.Names) > 0:
		return tpl.Names[0]
	case len(tpl.Aliases) > 0:
		return tpl.Aliases[0]
	}
	return tpl.TemplateID
}

// Tag gives the ready build buildID those of tags that no build of its template holds
// yet, as Wait does once a build is ready; it fails with an *Error of StageTags.
func Tag(ctx context.Context, api *e2bapi.Client, templateID, buildID string, tags []string) error {
	return wrapStage(StageTags, assignMissingTags(ctx, api, templateID, buildID, "", tags))
}

// assignMissingTags points those of tags that no build of the template holds yet at the
// ready build buildID: a build started on the template's waiting build got only the
// default tag at registration. Tags another build holds were assigned after this build
// was registered and are left alone. name is the template's name, read when empty.
func assignMissingTags(ctx context.Context, api *e2bapi.Client, templateID, buildID, name string, tags []string) error {
	if len(tags) == 0 {
		return nil
	}
	held, err := api.ListTags(ctx, templateID)
	if err != nil {
		return err
	}
	var missing []string
	for _, tag := range tags {
		if !slices.ContainsFunc(held, func(h e2bapi.TemplateTag) bool { return h.Tag == tag }) {
			missing = append(missing, tag)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if name == "" {
		tpl, err := api.GetTemplate(ctx, templateID)
		if err != nil {
			return err
		}
		name = templateName(tpl)
	}
	_, err = api.AssignTags(ctx, name+":"+buildID, missing)
	return err
}
