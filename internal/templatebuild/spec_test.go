package templatebuild

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
)

func int32p(v int32) *int32 { return &v }

// vectorBuild is the build of the spec hash vector in design/hashing.md §6.
func vectorBuild() *Build {
	return &Build{
		CPUCount: int32p(2), MemoryMB: int32p(1024),
		Start: e2b.TemplateBuildStartV2{
			FromImage: "ubuntu:22.04", StartCmd: "python app.py", ReadyCmd: "curl localhost:8000",
			Steps: []steps.Step{
				{Type: steps.Copy, Args: []string{"app", "/app", "", ""}, FilesHash: strings.Repeat("a", 64)},
				{Type: steps.Run, Args: []string{"echo hi"}},
			},
		},
		triggers: map[string]string{"date": "2026-12-01"},
	}
}

// TestSpecHashVector pins the encoding: the values were computed independently (in
// Python, from design/hashing.md §6), so a change to the encoding fails here.
func TestSpecHashVector(t *testing.T) {
	if got, want := specHash(vectorBuild().specFields()), "49062e4142b0b31bb7f89c87c95026a6ab61202682eb8c9a438bae07691399a7"; got != want {
		t.Errorf("spec hash %s, want %s", got, want)
	}
	bare := &Build{Start: e2b.TemplateBuildStartV2{FromImage: "busybox"}}
	if got, want := specHash(bare.specFields()), "bff107cd971b53a60e75a1fb4e1d5af6071ffb3cc4248a405ae7b768e530cc70"; got != want {
		t.Errorf("spec hash of a bare base %s, want %s", got, want)
	}
}

// TestSpecHashCovers changes every part of what defines a build, one at a time: each
// changes the hash; what does not define it (tags, force, credentials) does not.
func TestSpecHashCovers(t *testing.T) {
	base := specHash(vectorBuild().specFields())
	changes := map[string]func(b *Build){
		"from_image":    func(b *Build) { b.Start.FromImage = "ubuntu:24.04" },
		"from_template": func(b *Build) { b.Start.FromImage, b.Start.FromTemplate = "", "ubuntu:22.04" },
		"step type":     func(b *Build) { b.Start.Steps[1].Type = steps.Env },
		"step args":     func(b *Build) { b.Start.Steps[1].Args = []string{"echo ho"} },
		"step user":     func(b *Build) { b.Start.Steps[1].Args = append(b.Start.Steps[1].Args, "root") },
		"files hash":    func(b *Build) { b.Start.Steps[0].FilesHash = strings.Repeat("b", 64) },
		"step order":    func(b *Build) { slices.Reverse(b.Start.Steps) },
		"no step":       func(b *Build) { b.Start.Steps = b.Start.Steps[:1] },
		"start_cmd":     func(b *Build) { b.Start.StartCmd = "python other.py" },
		"ready_cmd":     func(b *Build) { b.Start.ReadyCmd = "" },
		"cpu_count":     func(b *Build) { b.CPUCount = int32p(4) },
		"cpu default":   func(b *Build) { b.CPUCount = nil },
		"memory_mb":     func(b *Build) { b.MemoryMB = int32p(2048) },
		"trigger value": func(b *Build) { b.triggers["date"] = "2026-12-02" },
		"trigger key":   func(b *Build) { b.triggers = map[string]string{"day": "2026-12-01"} },
		// Without a length prefix these two would feed the same bytes.
		"arg boundary": func(b *Build) { b.Start.Steps[1].Args = []string{"echo", " hi"} },
	}
	for name, change := range changes {
		b := vectorBuild()
		change(b)
		if specHash(b.specFields()) == base {
			t.Errorf("%s: the spec hash did not change", name)
		}
	}
	same := map[string]func(b *Build){
		"tags":       func(b *Build) { b.Tags = []string{"prod"} },
		"force":      func(b *Build) { b.Start.Force = true },
		"step force": func(b *Build) { b.Start.Steps[1].Force = true },
		"registry":   func(b *Build) { b.Start.FromImageRegistry = &e2b.FromImageRegistry{Type: "registry", Password: "x"} },
		"context":    func(b *Build) { b.ContextDir = "/elsewhere" },
		"reuse":      func(b *Build) { b.Reuse = true },
	}
	for name, change := range same {
		b := vectorBuild()
		change(b)
		if specHash(b.specFields()) != base {
			t.Errorf("%s: the spec hash changed", name)
		}
	}
}

// TestForcedBuildsDoNotReuse checks a forced build, or one with a forced step, looks for
// no build to reuse (the client is never used).
func TestForcedBuildsDoNotReuse(t *testing.T) {
	for name, b := range map[string]*Build{
		"force":      {Reuse: true, Start: e2b.TemplateBuildStartV2{Force: true}},
		"step force": {Reuse: true, Start: e2b.TemplateBuildStartV2{Steps: []steps.Step{{Type: steps.Run, Args: []string{"x"}, Force: true}}}},
		"no reuse":   {Start: e2b.TemplateBuildStartV2{Steps: []steps.Step{{Type: steps.Run, Args: []string{"x"}}}}},
	} {
		r := NewRunner(nil)
		if id, err := r.Reusable(t.Context(), b); id != "" || err != nil {
			t.Errorf("%s: Reusable = %q, %v; want none", name, id, err)
		}
		if _, reused, err := r.reuse(t.Context(), t.Context(), b, nil, "00000000-0000-4000-8000-000000000000", noopLogger{}); reused || err != nil {
			t.Errorf("%s: reuse = %v, %v; want a build", name, reused, err)
		}
	}
}

// TestPlanSpecHash plans one tree from two checkout paths (the same spec hash) and with
// a file changed (another one); reuse adds the spec tag, and the default tag when no
// other is configured.
func TestPlanSpecHash(t *testing.T) {
	files := map[string]string{"app/a.txt": "a", "app/b.txt": "b"}
	plan := func(dir string, spec Spec) *Build {
		t.Helper()
		acctest.WriteFiles(t, dir, files)
		spec.FromImage, spec.Context = "busybox", dir
		spec.Steps = []Step{{Step: steps.Step{Type: steps.Copy, Args: []string{"app", "/app", "", ""}}}}
		b, err := Plan(t.Context(), spec, &recorder{})
		acctest.Must(t, err)
		return b
	}
	first := plan(filepath.Join(t.TempDir(), "one"), Spec{})
	if len(first.SpecHash) != 64 || !slices.Equal(first.Tags, nil) {
		t.Fatalf("spec hash %q, tags %q without reuse", first.SpecHash, first.Tags)
	}
	if other := plan(filepath.Join(t.TempDir(), "two", "checkout"), Spec{}); other.SpecHash != first.SpecHash {
		t.Errorf("another checkout path: spec hash %s, want %s", other.SpecHash, first.SpecHash)
	}
	reused := plan(t.TempDir(), Spec{Reuse: true})
	if want := []string{e2b.DefaultTag, "spec-" + first.SpecHash[:16]}; !slices.Equal(reused.Tags, want) {
		t.Errorf("reuse without tags: tags %q, want %q", reused.Tags, want)
	}
	tagged := plan(t.TempDir(), Spec{Reuse: true, Tags: []string{"v1"}})
	if want := []string{"v1", SpecTag(first.SpecHash)}; !slices.Equal(tagged.Tags, want) || tagged.SpecHash != first.SpecHash {
		t.Errorf("reuse with tags: tags %q, want %q; spec hash %s", tagged.Tags, want, tagged.SpecHash)
	}
	files["app/b.txt"] = "changed"
	if changed := plan(t.TempDir(), Spec{}); changed.SpecHash == first.SpecHash {
		t.Errorf("a changed file left the spec hash %s", changed.SpecHash)
	}
}

// TestRunReuses runs one spec with reuse twice: the second run takes
// the first build and gives it its tags; a forced run builds; a planned build that is not
// there fails without building.
func TestRunReuses(t *testing.T) {
	_, api, reg := newTemplate(t)
	r := NewRunner(api)
	ctx := t.Context()
	spec := Spec{TemplateID: reg.TemplateID, FromImage: fakeBaseImage, Reuse: true, Tags: []string{"v1"},
		Steps: []Step{{Step: steps.NewRun(steps.RunArgs{Command: "echo reused"})}}}
	b, err := Plan(ctx, spec, &recorder{})
	acctest.Must(t, err)
	if id, err := r.Reusable(ctx, b); err != nil || id != "" {
		t.Fatalf("Reusable before any build = %q, %v", id, err)
	}
	first, err := r.Run(ctx, b, Options{})
	if err != nil || first.Status != e2b.BuildReady {
		t.Fatalf("first run: %+v, %v", first, err)
	}
	if id, err := r.Reusable(ctx, b); err != nil || id != first.BuildID {
		t.Fatalf("Reusable = %q, %v; want %s", id, err, first.BuildID)
	}

	spec.Tags = []string{"v2"}
	b, err = Plan(ctx, spec, &recorder{})
	acctest.Must(t, err)
	var log recorder
	second, err := r.Run(ctx, b, Options{Logger: &log})
	if err != nil || second != first || log.count("reused a ready build with the same spec hash instead of building") != 1 {
		t.Fatalf("second run: %+v, %v, log %q; want build %s reused", second, err, log.msgs, first.BuildID)
	}
	tags, err := api.ListTags(ctx, reg.TemplateID)
	acctest.Must(t, err)
	for _, want := range []string{"v1", "v2", SpecTag(b.SpecHash)} {
		if !slices.ContainsFunc(tags, func(tt e2b.TemplateTag) bool { return tt.Tag == want && tt.BuildID == first.BuildID }) {
			t.Errorf("tag %s does not point at %s: %+v", want, first.BuildID, tags)
		}
	}

	_, err = r.Run(ctx, b, Options{Reuse: "00000000-0000-4000-8000-000000000000"})
	var runErr *Error
	if !errors.As(err, &runErr) || runErr.Stage != StageReuse || !strings.Contains(err.Error(), "run terraform plan again") {
		t.Errorf("a planned build that is not there: %v, want a reuse error", err)
	}

	spec.Force = true
	b, err = Plan(ctx, spec, &recorder{})
	acctest.Must(t, err)
	forced, err := r.Run(ctx, b, Options{})
	if err != nil || forced.BuildID == first.BuildID {
		t.Errorf("forced run: %+v, %v; want a new build", forced, err)
	}
}

// TestRunReusesWithinOneProcess runs one spec with reuse twice at once, as two resources
// of one apply: one builds, the other waits and reuses that build.
func TestRunReusesWithinOneProcess(t *testing.T) {
	_, api, reg := newTemplate(t)
	r := NewRunner(api)
	ctx := t.Context()
	b, err := Plan(ctx, Spec{TemplateID: reg.TemplateID, FromImage: fakeBaseImage, Reuse: true,
		Steps: []Step{{Step: steps.NewRun(steps.RunArgs{Command: "sleep 1; echo once"})}}}, &recorder{})
	acctest.Must(t, err)
	results := make([]Result, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() { results[i], errs[i] = r.Run(ctx, b, Options{}) })
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil || results[0] != results[1] || results[0].Status != e2b.BuildReady {
		t.Fatalf("runs = %+v, %v; want one ready build for both", results, errs)
	}
	if ran := ranBuilds(t, api, reg.TemplateID); len(ran) != 1 || ran[0].BuildID != results[0].BuildID {
		t.Errorf("builds: %+v, want only %s", ran, results[0].BuildID)
	}
}

// TestRunWaitsForTheSameSpecElsewhere finds the spec tag on a build another run is
// building: Run waits for it and reuses it when it is ready, and builds when it failed,
// instead of starting a build that would cancel the other (both carry the tag).
func TestRunWaitsForTheSameSpecElsewhere(t *testing.T) {
	for name, other := range map[string]struct {
		command string
		reused  bool
	}{"ready": {"sleep 1; echo other", true}, "failed": {"sleep 1; exit 3", false}} {
		t.Run(name, func(t *testing.T) {
			_, api, reg := newTemplate(t)
			r := NewRunner(api)
			ctx := t.Context()
			b, err := Plan(ctx, Spec{TemplateID: reg.TemplateID, FromImage: fakeBaseImage, Reuse: true,
				Steps: []Step{{Step: steps.NewRun(steps.RunArgs{Command: "echo mine"})}}}, &recorder{})
			acctest.Must(t, err)
			// The other run: a build with the spec tag, started outside this process.
			started, err := api.CreateTemplateBuild(ctx, e2b.TemplateBuildRequestV3{Name: reg.Names[0], Tags: []string{SpecTag(b.SpecHash)}})
			acctest.Must(t, err)
			acctest.Must(t, api.StartBuild(ctx, reg.TemplateID, started.BuildID, e2b.TemplateBuildStartV2{
				FromImage: fakeBaseImage, Steps: []steps.Step{{Type: steps.Run, Args: []string{other.command}}}}))
			var log recorder
			res, err := r.Run(ctx, b, Options{Logger: &log})
			if err != nil || res.Status != e2b.BuildReady || (res.BuildID == started.BuildID) != other.reused {
				t.Fatalf("Run = %+v, %v; want the other build %s reused: %v", res, err, started.BuildID, other.reused)
			}
			if log.count("waiting for a build of the same spec hash that another run started, to reuse it") != 1 {
				t.Errorf("log %q does not say it waited", log.msgs)
			}
		})
	}
}

// TestRunReuseRunsOnTheWaitingBuild runs the first build of a template with reuse: it
// runs on the build E2B registered with the template, as every first build does, so that
// the template shows no build that never ran (superseded), and it gets its spec tag once
// ready.
func TestRunReuseRunsOnTheWaitingBuild(t *testing.T) {
	_, api, reg := newTemplate(t)
	b, err := Plan(t.Context(), Spec{TemplateID: reg.TemplateID, FromImage: fakeBaseImage, Reuse: true,
		Steps: []Step{{Step: steps.NewRun(steps.RunArgs{Command: "echo first"})}}}, &recorder{})
	acctest.Must(t, err)
	r := NewRunner(api)
	res, err := r.Run(t.Context(), b, Options{})
	if err != nil || res.BuildID != reg.BuildID || res.Status != e2b.BuildReady {
		t.Fatalf("Run = %+v, %v; want the waiting build %s, ready", res, err, reg.BuildID)
	}
	if builds := ranBuilds(t, api, reg.TemplateID); len(builds) != 1 {
		t.Errorf("builds %+v, want only the one that ran", builds)
	}
	if id, err := r.Reusable(t.Context(), b); err != nil || id != res.BuildID {
		t.Errorf("Reusable = %q, %v; want %s carrying the spec tag", id, err, res.BuildID)
	}
}
