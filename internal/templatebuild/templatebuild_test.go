package templatebuild

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
)

func TestMain(m *testing.M) {
	if os.Getenv(otherProcessEnv) != "" {
		os.Exit(runOtherProcess())
	}
	os.Exit(m.Run())
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

// newTemplate registers a template on a stand-in of E2B (which leaves it a waiting
// build).
func newTemplate(t *testing.T) (*fakeE2B, *e2bapi.Client, *e2b.TemplateRequestResponseV3) {
	t.Helper()
	srv := newFakeE2B(t)
	api := srv.client(t, "")
	reg, err := api.CreateTemplateBuild(t.Context(), e2b.TemplateBuildRequestV3{Name: "templatebuild"})
	acctest.Must(t, err)
	return srv, api, reg
}

// hashedCopy is the step COPY . /app at index step, hashed in mode over dir.
func hashedCopy(t *testing.T, dir, mode string, step int) Copy {
	t.Helper()
	c := Copy{Step: step, Src: ".", Dest: "/app"}
	_, err := c.hash(t.Context(), dir, mode, nil)
	acctest.Must(t, err)
	return c
}

// TestUploadMissing uploads an archive two steps share once, then nothing when the server
// has it, again once when one of the steps forces the upload, and names the step whose
// files changed since they were hashed.
func TestUploadMissing(t *testing.T) {
	srv, api, reg := newTemplate(t)
	dir := t.TempDir()
	acctest.WriteFiles(t, dir, map[string]string{"a.txt": "a", "sub/b.txt": "b"})
	copies := []Copy{hashedCopy(t, dir, HashPortable, 0), hashedCopy(t, dir, HashPortable, 2)}

	before := srv.uploadCount()
	var log recorder
	acctest.Must(t, uploadMissing(t.Context(), api, reg.TemplateID, copies, &log))
	acctest.Must(t, uploadMissing(t.Context(), api, reg.TemplateID, copies, &log))
	after := srv.uploadCount()
	if n := after - before; n != 1 {
		t.Errorf("%d uploads, want 1 for one archive asked for twice by two steps", n)
	}
	if log.count("build context uploaded") != 1 || log.count("build context already uploaded") != 1 {
		t.Errorf("log %q, want one upload then one archive found present", log.msgs)
	}

	// A step that forces its upload sends the archive the server has again, once.
	forced := slices.Clone(copies)
	forced[1].forceUpload = true
	acctest.Must(t, uploadMissing(t.Context(), api, reg.TemplateID, forced, &log))
	again := srv.uploadCount()
	if n := again - after; n != 1 || log.count("build context uploaded") != 2 {
		t.Errorf("%d uploads (log %q), want the forced archive uploaded again once", n, log.msgs)
	}

	// Either mode walks the context again for the archive and checks it against the plan:
	// the same size, so only the hash shows the change.
	changedDir := t.TempDir()
	acctest.WriteFiles(t, changedDir, map[string]string{"c.txt": "before"})
	planned := []Copy{hashedCopy(t, changedDir, HashPortable, 1), hashedCopy(t, changedDir, HashSDK, 1)}
	acctest.WriteFiles(t, changedDir, map[string]string{"c.txt": "after!"})
	for _, c := range planned {
		err := uploadMissing(t.Context(), api, reg.TemplateID, []Copy{c}, &log)
		var pe *PlanError
		if !errors.As(err, &pe) || len(pe.Issues) != 1 || pe.Issues[0].Summary != "Build context changed since plan" ||
			!strings.Contains(pe.Issues[0].Detail, "The files of COPY . /app (step 2) changed after the plan: files hash "+c.Hash+" at plan") ||
			!strings.Contains(pe.Issues[0].Detail, "Most recently modified: "+filepath.Join(changedDir, "c.txt")) {
			t.Errorf("upload of a changed tree (e2b-sdk %v): %v, want the step's change since plan naming the file", c.sdk, err)
		}
	}
}

// TestRunOnTheWaitingBuildThenANewOne runs the first build on the template's waiting
// build and gives it its tags once ready, then registers a new build for the next one.
func TestRunOnTheWaitingBuildThenANewOne(t *testing.T) {
	_, api, reg := newTemplate(t)
	r := NewRunner(api)
	ctx := t.Context()
	spec := Spec{TemplateID: reg.TemplateID, FromImage: fakeBaseImage, Tags: []string{"v1"},
		Steps: []Step{{Step: steps.NewRun(steps.RunArgs{Command: "echo first build"})}}}
	b, err := Plan(ctx, spec, &recorder{})
	acctest.Must(t, err)
	var log recorder
	var described []string
	var started string
	first, err := r.Run(ctx, b, Options{
		Logger:  &log,
		Started: func(id string) error { started = id; return nil },
		OnLog:   func(_ e2b.BuildLogEntry, step string) { described = append(described, step) },
	})
	if err != nil || first.Status != e2b.BuildReady {
		t.Fatalf("first build: %+v, %v", first, err)
	}
	if first.BuildID != reg.BuildID || started != first.BuildID || log.count("build started on the template's waiting build") != 1 {
		t.Fatalf("first build %s (Started saw %q), want the waiting build %s; log %q", first.BuildID, started, reg.BuildID, log.msgs)
	}
	if !slices.Contains(described, "step 1 (RUN echo first build)") {
		t.Errorf("log lines' steps %q do not describe step 1", described)
	}

	spec.Tags = []string{"v2"}
	b, err = Plan(ctx, spec, &recorder{})
	acctest.Must(t, err)
	second, err := r.Run(ctx, b, Options{Logger: &log})
	if err != nil || second.Status != e2b.BuildReady {
		t.Fatalf("second build: %+v, %v", second, err)
	}
	if second.BuildID == first.BuildID || log.count("build started") != 1 {
		t.Fatalf("second build %s, want a newly registered one; log %q", second.BuildID, log.msgs)
	}
	tags, err := api.ListTags(ctx, reg.TemplateID)
	acctest.Must(t, err)
	want := map[string]string{"v1": first.BuildID, "v2": second.BuildID}
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

// TestRunFailedBuild checks the error of a failed build names its step and shows its
// last log lines.
func TestRunFailedBuild(t *testing.T) {
	_, api, reg := newTemplate(t)
	r := NewRunner(api)
	b, err := Plan(t.Context(), Spec{TemplateID: reg.TemplateID, FromImage: fakeBaseImage,
		Steps: []Step{{Step: steps.NewRun(steps.RunArgs{Command: "echo about to fail; exit 7"})}}}, &recorder{})
	acctest.Must(t, err)
	res, err := r.Run(t.Context(), b, Options{})
	var failed *FailedError
	if res.Status != e2b.BuildError || !errors.As(err, &failed) {
		t.Fatalf("Run = %+v, %v; want status error and a FailedError", res, err)
	}
	for _, want := range []string{"Build " + res.BuildID + " of template " + reg.TemplateID + " failed at step 1 (RUN echo about to fail; exit 7)", "log lines:", "about to fail"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestTemplateName(t *testing.T) {
	for want, tpl := range map[string]*e2b.TemplateWithBuilds{
		"team/app": {TemplateID: "id", Names: []string{"team/app"}, Aliases: []string{"app"}},
		"app":      {TemplateID: "id", Aliases: []string{"app"}},
		"id":       {TemplateID: "id"},
	} {
		if got := templateName(tpl); got != want {
			t.Errorf("templateName(%+v) = %q, want %q", tpl, got, want)
		}
	}
}

// dropStarts is a reverse proxy in front of the stand-in that forwards every request
// but drops the answer of the first n build starts (the POST reaches the server, the
// connection closes before its 202 comes back).
func dropStarts(t *testing.T, target string, n int) string {
	t.Helper()
	u, err := url.Parse(target)
	acctest.Must(t, err)
	proxy := httputil.NewSingleHostReverseProxy(u)
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		drop := r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v2/templates/") && n > 0
		if drop {
			n--
		}
		mu.Unlock()
		if !drop {
			proxy.ServeHTTP(w, r)
			return
		}
		proxy.ServeHTTP(httptest.NewRecorder(), r)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestRunAnswerOfTheStartLost loses the answer of the build start, on the waiting build
// and on a new one: the build did start, and Run follows it to the end instead of
// failing (after which the next apply would build again).
func TestRunAnswerOfTheStartLost(t *testing.T) {
	srv, _, reg := newTemplate(t)
	api := srv.client(t, dropStarts(t, srv.URL, 2))
	r := NewRunner(api)
	ctx := t.Context()
	for i, tag := range []string{"v1", "v2"} {
		b, err := Plan(ctx, Spec{TemplateID: reg.TemplateID, FromImage: fakeBaseImage, Tags: []string{tag},
			Steps: []Step{{Step: steps.NewRun(steps.RunArgs{Command: "echo " + tag})}}}, &recorder{})
		acctest.Must(t, err)
		var log recorder
		res, err := r.Run(ctx, b, Options{Logger: &log})
		if err != nil || res.Status != e2b.BuildReady {
			t.Fatalf("build %d with its start's answer lost: %+v, %v", i+1, res, err)
		}
		if log.count("the answer to the build start was lost, but the build started") != 1 {
			t.Errorf("build %d: log %q", i+1, log.msgs)
		}
	}
	tpl, err := api.GetTemplate(ctx, reg.TemplateID)
	acctest.Must(t, err)
	if len(tpl.Builds) != 2 {
		t.Errorf("builds %+v, want the two started ones only", tpl.Builds)
	}
}

// TestRunTwoBuildsOfOneTemplateAtOnce runs two builds without tags of a new template at
// the same time, as one apply of two e2b_template_builds does: both carry the default
// tag, so starting one would cancel the other; both must end ready.
func TestRunTwoBuildsOfOneTemplateAtOnce(t *testing.T) {
	_, api, reg := newTemplate(t)
	r := NewRunner(api)
	ctx := t.Context()
	var wg sync.WaitGroup
	results := make([]Result, 2)
	errs := make([]error, 2)
	for i := range results {
		b, err := Plan(ctx, Spec{TemplateID: reg.TemplateID, FromImage: fakeBaseImage,
			Steps: []Step{{Step: steps.NewRun(steps.RunArgs{Command: fmt.Sprintf("sleep 2; echo build %d", i)})}}}, &recorder{})
		acctest.Must(t, err)
		wg.Go(func() { results[i], errs[i] = r.Run(ctx, b, Options{}) })
	}
	wg.Wait()
	for i := range results {
		if errs[i] != nil || results[i].Status != e2b.BuildReady {
			t.Errorf("build %d: %+v, %v", i+1, results[i], errs[i])
		}
	}
	if results[0].BuildID == results[1].BuildID {
		t.Errorf("both runs followed build %s", results[0].BuildID)
	}
}

// TestWaitWhileAnotherBuildStarts follows a build an earlier run left going while a new
// build of the template without tags starts: the new one waits for it instead of
// cancelling it, and both end ready.
func TestWaitWhileAnotherBuildStarts(t *testing.T) {
	_, api, reg := newTemplate(t)
	r := NewRunner(api)
	ctx := t.Context()
	plan := func(cmd string) *Build {
		b, err := Plan(ctx, Spec{TemplateID: reg.TemplateID, FromImage: fakeBaseImage,
			Steps: []Step{{Step: steps.NewRun(steps.RunArgs{Command: cmd})}}}, &recorder{})
		acctest.Must(t, err)
		return b
	}
	left, err := r.Run(ctx, plan("sleep 4; echo left going"), Options{Timeout: time.Second})
	var timeout *TimeoutError
	if !errors.As(err, &timeout) {
		t.Fatalf("first run: %+v, %v; want a timeout", left, err)
	}
	var wg sync.WaitGroup
	var waited string
	var waitErr error
	wg.Go(func() { waited, waitErr = r.Wait(ctx, reg.TemplateID, left.BuildID, nil, Options{}) })
	time.Sleep(100 * time.Millisecond) // Wait has registered the build
	next, err := r.Run(ctx, plan("echo next"), Options{})
	wg.Wait()
	if waitErr != nil || waited != e2b.BuildReady {
		t.Errorf("the build left going: %s, %v", waited, waitErr)
	}
	if err != nil || next.Status != e2b.BuildReady {
		t.Errorf("the next build: %+v, %v", next, err)
	}
}

// The other process of TestRunSameSpecInTwoProcesses: this test binary, run again with
// otherProcessEnv naming the stand-in of E2B, the API key and the template, tab-separated.
const otherProcessEnv = "TEMPLATEBUILD_TEST_OTHER_PROCESS"

// twoProcessSpec is the build both processes run.
func twoProcessSpec(templateID, image string) Spec {
	return Spec{TemplateID: templateID, FromImage: image, Reuse: true,
		Steps: []Step{{Step: steps.NewRun(steps.RunArgs{Command: "sleep 3; echo one build of this spec"})}}}
}

// runOtherProcess runs twoProcessSpec and prints the build ID it ended with.
func runOtherProcess() int {
	args := strings.Split(os.Getenv(otherProcessEnv), "\t")
	if len(args) != 4 {
		fmt.Fprintf(os.Stderr, "%s must hold 4 tab-separated values\n", otherProcessEnv)
		return 2
	}
	ctx := context.Background()
	api, err := e2bapi.New(e2bapi.Config{BaseURL: args[0], APIKey: args[1], MaxRetries: 2})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var log recorder
	b, err := Plan(ctx, twoProcessSpec(args[2], args[3]), &log)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	res, err := NewRunner(api).Run(ctx, b, Options{Logger: &log})
	if err != nil || res.Status != e2b.BuildReady {
		fmt.Fprintf(os.Stderr, "run: %+v, %v; log %q\n", res, err, log.msgs)
		return 1
	}
	fmt.Fprintf(os.Stderr, "log %q\n", log.msgs)
	fmt.Print(res.BuildID)
	return 0
}

// TestRunSameSpecInTwoProcesses runs one spec with reuse in this process and, once its
// build is in progress, in another process (as two applies of two states do): the other
// finds the build in the tag list, waits for it and takes it, so exactly one build runs,
// none is cancelled and both end with its ID. The template has had its first build: that
// one runs on the waiting build, which carries no spec tag before it is ready.
func TestRunSameSpecInTwoProcesses(t *testing.T) {
	srv, api, reg := newTemplate(t)
	r := NewRunner(api)
	ctx := t.Context()
	first, err := Plan(ctx, Spec{TemplateID: reg.TemplateID, FromImage: fakeBaseImage, Tags: []string{"first"},
		Steps: []Step{{Step: steps.NewRun(steps.RunArgs{Command: "echo first"})}}}, &recorder{})
	acctest.Must(t, err)
	if res, err := r.Run(ctx, first, Options{}); err != nil || res.BuildID != reg.BuildID {
		t.Fatalf("the template's first build: %+v, %v", res, err)
	}
	b, err := Plan(ctx, twoProcessSpec(reg.TemplateID, fakeBaseImage), &recorder{})
	acctest.Must(t, err)
	var other *exec.Cmd
	var otherOut, otherErr strings.Builder
	res, err := r.Run(ctx, b, Options{Started: func(string) error {
		other = exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		other.Env = append(os.Environ(), otherProcessEnv+"="+strings.Join([]string{srv.URL, srv.APIKey, reg.TemplateID, fakeBaseImage}, "\t"))
		other.Stdout, other.Stderr = &otherOut, &otherErr
		return other.Start()
	}})
	if err != nil || res.Status != e2b.BuildReady {
		t.Fatalf("this process: %+v, %v", res, err)
	}
	if err := other.Wait(); err != nil {
		t.Fatalf("the other process: %v\n%s", err, otherErr.String())
	}
	t.Logf("the other process: %s", otherErr.String())
	if otherOut.String() != res.BuildID {
		t.Errorf("the other process ended with build %q, this one with %s", otherOut.String(), res.BuildID)
	}
	if ran := ranBuilds(t, api, reg.TemplateID, reg.BuildID); len(ran) != 1 || ran[0].BuildID != res.BuildID || ran[0].Status != e2b.BuildReady {
		t.Errorf("builds besides the first: %+v, want only %s, ready", ran, res.BuildID)
	}
}

// ranBuilds are the builds of the template but those named in before.
func ranBuilds(t *testing.T, api *e2bapi.Client, templateID string, before ...string) []e2b.TemplateBuild {
	t.Helper()
	tpl, err := api.GetTemplate(t.Context(), templateID)
	acctest.Must(t, err)
	return slices.DeleteFunc(tpl.Builds, func(b e2b.TemplateBuild) bool { return slices.Contains(before, b.BuildID) })
}
