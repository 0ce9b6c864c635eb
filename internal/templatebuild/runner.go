// Package templatebuild is the use case of one template build on E2B (the cloud,
// self-hosted E2B or the local server): Plan resolves a configured build (its Dockerfile,
// its context, the listing and files hash of every COPY source) without calling the API;
// a Runner uploads the archives the server lacks, registers and starts the build, follows
// it to the end and says why it failed (Run), follows a build an earlier run left going
// (Wait), tags a ready build (Tag) and finds a ready build to reuse (Reusable). It knows
// nothing of Terraform; the provider turns its results into state and diagnostics.
package templatebuild

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

// Runner runs the builds of one API client. It holds what the runs of one process must
// share: the client, the poller that follows builds and the coordination of the builds
// it starts (flights, sameSpec). Create one per provider instance with NewRunner; its
// methods are safe for concurrent use.
type Runner struct {
	api    *e2bapi.Client
	poller poller
	// running are the builds this Runner started or follows (flights.go).
	running *flights
	// sameSpec makes the runs of one template and spec hash with reuse go one after the
	// other, so that the later ones reuse the first build instead of building it again
	// (the plan found none, as neither had run).
	sameSpec *keyedLocks
}

// NewRunner returns a Runner of api that polls builds as the E2B SDK does.
func NewRunner(api *e2bapi.Client) *Runner {
	return &Runner{
		api:      api,
		poller:   poller{interval: pollInterval, sleep: sleepContext},
		running:  &flights{m: map[string][]*flight{}},
		sameSpec: &keyedLocks{},
	}
}

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
	OnLog func(line e2b.BuildLogEntry, step string)
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

// Run runs the build b: it uploads the COPY archives the server does not have, starts the
// build, calls opts.Started, and waits for the build to end. It fails with an *Error (of
// StageUpload around a *PlanError when COPY files changed since the plan), a
// *FailedError (the build failed) or a *TimeoutError (the build goes on); Result says
// what became of the build in every case. A build with Reuse instead takes a ready build
// that carries its spec tag, when there is one, and gives it b's tags.
func (r *Runner) Run(ctx context.Context, b *Build, opts Options) (Result, error) {
	log := logger(opts)
	waitCtx, cancel := withTimeout(ctx, opts.Timeout)
	defer cancel()
	if b.reuses() {
		unlock, err := r.sameSpec.lock(waitCtx, b.TemplateID+"/"+b.SpecHash)
		if err != nil {
			return Result{}, &Error{StageReuse, fmt.Errorf("waiting for a build of the same spec hash to end: %w", err)}
		}
		defer unlock()
	}
	// Read once, first, to fail early on a wrong template: its name and its waiting
	// build serve every later step.
	tpl, err := r.api.GetTemplate(ctx, b.TemplateID)
	if err != nil {
		return Result{}, &Error{StageTemplate, err}
	}
	if res, reused, err := r.reuse(ctx, waitCtx, b, tpl, opts.Reuse, log); reused || err != nil {
		return res, err
	}
	if err := uploadMissing(waitCtx, r.api, b.TemplateID, b.Copies, log); err != nil {
		return Result{}, &Error{StageUpload, err}
	}
	buildID, onWaiting, fl, err := r.startAlone(ctx, waitCtx, tpl, b, log)
	defer r.running.finish(fl)
	unconfirmed := errors.Is(err, ErrStartUnconfirmed) && buildID != ""
	if err != nil && !unconfirmed {
		return Result{}, &Error{StageStart, err}
	}
	if opts.Started != nil {
		if err := opts.Started(buildID); err != nil {
			return Result{BuildID: buildID, Status: e2b.BuildBuilding}, err
		}
	}
	if err != nil {
		// The build may be running: the caller keeps it as building, and whoever looks
		// at it next finds out (a build still waiting was never started).
		return Result{BuildID: buildID, Status: e2b.BuildBuilding}, &Error{StageStart, err}
	}
	// A build registered anew got its tags then; one started on the waiting build only
	// carries the default tag until it is ready.
	var tags []string
	if onWaiting {
		tags = b.Tags
	}
	status, err := r.wait(ctx, waitCtx, b.TemplateID, buildID, b.Start.Steps, tags, templateName(tpl), opts)
	return Result{BuildID: buildID, Status: status}, err
}

// Wait waits for a build an earlier run left going (Run's *TimeoutError) and, once it is
// ready, gives it those of tags no build holds yet. Meanwhile Run starts no build of the
// template sharing a tag with it (see flights). It returns the build's status and
// fails like Run. Log lines name step numbers only: the steps are not known here.
func (r *Runner) Wait(ctx context.Context, templateID, buildID string, tags []string, opts Options) (string, error) {
	waitCtx, cancel := withTimeout(ctx, opts.Timeout)
	defer cancel()
	// Followed again: a build started meanwhile must not cancel it. Its tags at the
	// start are not known here; the default tag and tags cover every case.
	defer r.running.finish(r.running.add(templateID, buildID, append(slices.Clone(tags), e2b.DefaultTag)))
	return r.wait(ctx, waitCtx, templateID, buildID, nil, tags, "", opts)
}

// wait follows the build under waitCtx, then tags it. name is the template's name when
// known (else it is read when a tag is missing).
func (r *Runner) wait(ctx, waitCtx context.Context, templateID, buildID string, buildSteps []e2b.TemplateStep, tags []string, name string, opts Options) (string, error) {
	info, err := r.poller.follow(waitCtx, r.api, templateID, buildID, buildSteps, opts.OnLog)
	var failed *FailedError
	switch {
	case errors.As(err, &failed):
		return e2b.BuildError, err
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return e2b.BuildBuilding, &TimeoutError{TemplateID: templateID, BuildID: buildID}
	case err != nil:
		return e2b.BuildBuilding, &Error{StageFollow, err}
	}
	if info.Status == e2b.BuildReady {
		if err := assignMissingTags(ctx, r.api, templateID, buildID, name, tags); err != nil {
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
