package templatebuild

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/buildcontext"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

func TestMain(m *testing.M) {
	code := m.Run()
	acctest.StopShared()
	os.Exit(code)
}

// recorder is a Logger that keeps the messages.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Debug(_ context.Context, msg string, _ map[string]any) { r.add(msg) }
func (r *recorder) Info(_ context.Context, msg string, _ map[string]any)  { r.add(msg) }
func (r *recorder) Warn(_ context.Context, msg string, _ map[string]any)  { r.add(msg) }

func (r *recorder) add(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, msg)
}

func (r *recorder) count(msg string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.msgs {
		if m == msg {
			n++
		}
	}
	return n
}

// newTemplate registers a template on the shared local server (which leaves it a waiting
// build) and deletes it when the test ends.
func newTemplate(t *testing.T) (*acctest.Server, *e2bapi.Client, *e2bapi.TemplateRequestResponseV3) {
	t.Helper()
	srv := acctest.Shared(t)
	api, err := e2bapi.New(e2bapi.Config{BaseURL: srv.APIURL, APIKey: srv.APIKey, MaxRetries: 2})
	acctest.Must(t, err)
	reg, err := api.CreateTemplateBuild(t.Context(), e2bapi.TemplateBuildRequestV3{Name: fmt.Sprintf("templatebuild-%d", time.Now().UnixNano())})
	acctest.Must(t, err)
	t.Cleanup(func() {
		if err := api.DeleteTemplate(context.Background(), reg.TemplateID); err != nil {
			t.Errorf("deleting template %s: %v", reg.TemplateID, err)
		}
	})
	return srv, api, reg
}

func hashedListing(t *testing.T, dir string) (*buildcontext.Listing, string) {
	t.Helper()
	l, err := buildcontext.List(dir, ".", buildcontext.ListOptions{})
	acctest.Must(t, err)
	hash, err := l.PortableHash(t.Context(), "/app", buildcontext.HashOptions{})
	acctest.Must(t, err)
	return l, hash
}

// TestUploadMissing uploads an archive two steps share once, then nothing when the server
// has it, and names the step whose files changed since they were hashed.
func TestUploadMissing(t *testing.T) {
	srv, api, reg := newTemplate(t)
	dir := t.TempDir()
	acctest.WriteFiles(t, dir, map[string]string{"a.txt": "a", "sub/b.txt": "b"})
	l, hash := hashedListing(t, dir)
	copies := []Copy{{Name: "COPY . /app (step 1)", Listing: l, Hash: hash}, {Name: "COPY . /app (step 3)", Listing: l, Hash: hash}}

	before, err := srv.Stats(t.Context())
	acctest.Must(t, err)
	var log recorder
	acctest.Must(t, UploadMissing(t.Context(), api, reg.TemplateID, copies, &log))
	acctest.Must(t, UploadMissing(t.Context(), api, reg.TemplateID, copies, &log))
	after, err := srv.Stats(t.Context())
	acctest.Must(t, err)
	if n := after.Uploads - before.Uploads; n != 1 {
		t.Errorf("%d uploads, want 1 for one archive asked for twice by two steps", n)
	}
	if log.count("build context uploaded") != 1 || log.count("build context already uploaded") != 1 {
		t.Errorf("log %q, want one upload then one archive found present", log.msgs)
	}

	changedDir := t.TempDir()
	acctest.WriteFiles(t, changedDir, map[string]string{"c.txt": "before"})
	changed, changedHash := hashedListing(t, changedDir)
	acctest.WriteFiles(t, changedDir, map[string]string{"c.txt": "after!"})
	err = UploadMissing(t.Context(), api, reg.TemplateID, []Copy{{Name: "COPY . /app (step 2)", Listing: changed, Hash: changedHash}}, &log)
	if !errors.Is(err, buildcontext.ErrChanged) || !strings.Contains(err.Error(), "COPY . /app (step 2)") || !strings.Contains(err.Error(), "c.txt") {
		t.Errorf("upload of a changed tree: %v, want ErrChanged naming the step and the file", err)
	}
}

// TestStartAndFollow starts the first build on the template's waiting build, gives it its
// tags once ready, then registers a new build for the next one.
func TestStartAndFollow(t *testing.T) {
	srv, api, reg := newTemplate(t)
	ctx := t.Context()
	tpl, err := api.GetTemplate(ctx, reg.TemplateID)
	acctest.Must(t, err)
	steps := []e2bapi.TemplateStep{{Type: e2bapi.StepRun, Args: []string{"echo first build"}}}
	var log recorder
	first, onWaiting, err := Start(ctx, api, tpl, Request{Tags: []string{"v1"}, Start: e2bapi.TemplateBuildStartV2{FromImage: srv.BaseImage, Steps: steps}}, &log)
	acctest.Must(t, err)
	if first != reg.BuildID || !onWaiting {
		t.Fatalf("first build %s (on waiting build: %v), want the waiting build %s", first, onWaiting, reg.BuildID)
	}
	var described []string
	status, err := Follow(ctx, api, reg.TemplateID, first, steps, func(_ e2bapi.BuildLogEntry, step string) { described = append(described, step) })
	if err != nil || status != e2bapi.BuildReady {
		t.Fatalf("first build: %s, %v", status, err)
	}
	if !slices.Contains(described, "step 1 (RUN echo first build)") {
		t.Errorf("log lines' steps %q do not describe step 1", described)
	}
	acctest.Must(t, AssignMissingTags(ctx, api, reg.TemplateID, first, []string{"v1", e2bapi.DefaultTag}))

	tpl, err = api.GetTemplate(ctx, reg.TemplateID)
	acctest.Must(t, err)
	second, onWaiting, err := Start(ctx, api, tpl, Request{Tags: []string{"v2"}, Start: e2bapi.TemplateBuildStartV2{FromImage: srv.BaseImage, Steps: steps}}, &log)
	acctest.Must(t, err)
	if second == first || onWaiting {
		t.Fatalf("second build %s (on waiting build: %v), want a newly registered one", second, onWaiting)
	}
	if status, err := Follow(ctx, api, reg.TemplateID, second, nil, func(e2bapi.BuildLogEntry, string) {}); err != nil || status != e2bapi.BuildReady {
		t.Fatalf("second build: %s, %v", status, err)
	}
	tags, err := api.ListTags(ctx, reg.TemplateID)
	acctest.Must(t, err)
	want := map[string]string{"v1": first, "v2": second}
	for _, tag := range tags {
		if id, ok := want[tag.Tag]; ok && id != tag.BuildID {
			t.Errorf("tag %s points at %s, want %s", tag.Tag, tag.BuildID, id)
		}
		delete(want, tag.Tag)
	}
	if len(want) != 0 {
		t.Errorf("tags %v missing from %+v", want, tags)
	}
}

// TestFollowFailedBuild checks the error of a failed build names its step and shows its
// last log lines.
func TestFollowFailedBuild(t *testing.T) {
	srv, api, reg := newTemplate(t)
	tpl, err := api.GetTemplate(t.Context(), reg.TemplateID)
	acctest.Must(t, err)
	steps := []e2bapi.TemplateStep{{Type: e2bapi.StepRun, Args: []string{"echo about to fail; exit 7"}}}
	buildID, _, err := Start(t.Context(), api, tpl, Request{Start: e2bapi.TemplateBuildStartV2{FromImage: srv.BaseImage, Steps: steps}}, &recorder{})
	acctest.Must(t, err)
	status, err := Follow(t.Context(), api, reg.TemplateID, buildID, steps, func(e2bapi.BuildLogEntry, string) {})
	var failed *FailedError
	if status != e2bapi.BuildError || !errors.As(err, &failed) {
		t.Fatalf("Follow = %s, %v; want status error and a FailedError", status, err)
	}
	for _, want := range []string{"Build " + buildID + " of template " + reg.TemplateID + " failed at step 1 (RUN echo about to fail; exit 7)", "log lines:", "about to fail"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestFailedErrorShowsTheTail(t *testing.T) {
	steps := []e2bapi.TemplateStep{{Type: "RUN", Args: []string{"true"}}, {Type: "RUN", Args: []string{"exit 7"}}}
	var tail []e2bapi.BuildLogEntry
	for i := range 40 {
		tail = append(tail, e2bapi.BuildLogEntry{Message: fmt.Sprintf("line %d", i), Step: "2"})
	}
	tail = append(tail, e2bapi.BuildLogEntry{Message: "no step\n"})
	err := &FailedError{TemplateID: "tpl", BuildID: "bid", Reason: &e2bapi.BuildStatusReason{Message: "exit status 7", Step: "2"}, Steps: steps, Tail: tail[11:]}
	got := err.Error()
	for _, want := range []string{"Build bid of template tpl failed at step 2 (RUN exit 7): exit status 7.", "Last 30 log lines", "[2] line 11", "[2] line 39", "[-] no step\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("message lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "line 10\n") {
		t.Errorf("message has more than the tail:\n%s", got)
	}
}

func TestDescribeStep(t *testing.T) {
	steps := []e2bapi.TemplateStep{{Type: "COPY", Args: []string{"app", "/app"}}, {Type: "RUN", Args: []string{strings.Repeat("x", 100)}}}
	for step, want := range map[string]string{
		"1":        "step 1 (COPY app /app)",
		"2":        "step 2 (RUN " + strings.Repeat("x", 77) + "...)",
		"3":        "3",
		"base":     "base",
		"finalize": "finalize",
	} {
		if got := DescribeStep(steps, step); got != want {
			t.Errorf("DescribeStep(%q) = %q, want %q", step, got, want)
		}
	}
}

func TestTemplateName(t *testing.T) {
	for want, tpl := range map[string]*e2bapi.TemplateWithBuilds{
		"team/app": {TemplateID: "id", Names: []string{"team/app"}, Aliases: []string{"app"}},
		"app":      {TemplateID: "id", Aliases: []string{"app"}},
		"id":       {TemplateID: "id"},
	} {
		if got := TemplateName(tpl); got != want {
			t.Errorf("TemplateName(%+v) = %q, want %q", tpl, got, want)
		}
	}
}
