package store

import (
	"fmt"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

func openStore(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path, "local", nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newStore(t *testing.T) *Store {
	t.Helper()
	s := openStore(t, filepath.Join(t.TempDir(), "state.db"))
	t.Cleanup(func() { s.Close() })
	return s
}

func register(t *testing.T, s *Store, name string, tags ...string) Registered {
	t.Helper()
	r, err := s.Catalog.RegisterBuild(RegisterRequest{Name: name, Tags: tags, CPUCount: 2, MemoryMB: 1024})
	if err != nil {
		t.Fatalf("register %s: %v", name, err)
	}
	return r
}

// build runs a registered build to ready.
func build(t *testing.T, s *Store, r Registered) {
	t.Helper()
	if _, _, err := s.Catalog.StartBuild(r.Template.ID, r.Build.ID, BuildRequest{FromImage: "img"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Catalog.FinishBuild(r.Template.ID, r.Build.ID, &BuildResult{Image: "img-" + r.Build.ID}, nil); err != nil {
		t.Fatal(err)
	}
}

func resolvesTo(t *testing.T, s *Store, ref, buildID string) {
	t.Helper()
	_, b, err := s.Catalog.Resolve(ref)
	if err != nil {
		t.Fatalf("resolve %s: %v", ref, err)
	}
	if b.ID != buildID {
		t.Fatalf("resolve %s = build %s, want %s", ref, b.ID, buildID)
	}
}

// listsAt checks the tag list names buildID for the default tag.
func listsAt(t *testing.T, s *Store, templateID, buildID string) {
	t.Helper()
	list, err := s.Catalog.Tags(templateID)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list, func(l Assignment) bool { return l.Tag == e2b.DefaultTag })
	if i < 0 || list[i].BuildID != buildID {
		t.Fatalf("tags = %+v, want default at build %s", list, buildID)
	}
}

// TestRebuildKeepsTagOnLastGoodBuild checks a rebuild under a tag takes the tag in the
// list at once, while the tag resolves to the last good build until the rebuild is
// ready, also when it fails (design/e2b-api.md §4).
func TestRebuildKeepsTagOnLastGoodBuild(t *testing.T) {
	s := newStore(t)
	first := register(t, s, "app")
	if _, _, err := s.Catalog.Resolve("app"); failure.KindOf(err) != failure.NotFound {
		t.Fatalf("a waiting build must not resolve; got %v", err)
	}
	build(t, s, first)
	resolvesTo(t, s, "app", first.Build.ID)
	listsAt(t, s, first.Template.ID, first.Build.ID)

	second := register(t, s, "local/app:default")
	if second.Template.ID != first.Template.ID {
		t.Fatalf("rebuild under the same name got template %s, want %s", second.Template.ID, first.Template.ID)
	}
	if second.Build.ID == first.Build.ID {
		t.Fatal("rebuild reused the build ID")
	}
	// Waiting and running: listed at the rebuild, resolving to the good build.
	listsAt(t, s, first.Template.ID, second.Build.ID)
	if _, _, err := s.Catalog.StartBuild(second.Template.ID, second.Build.ID, BuildRequest{FromImage: "img"}); err != nil {
		t.Fatal(err)
	}
	resolvesTo(t, s, "app", first.Build.ID)
	listsAt(t, s, first.Template.ID, second.Build.ID)
	// Failed: the same.
	if _, err := s.Catalog.FinishBuild(second.Template.ID, second.Build.ID, nil, &BuildReason{Message: "boom"}); err != nil {
		t.Fatal(err)
	}
	resolvesTo(t, s, "app", first.Build.ID)
	listsAt(t, s, first.Template.ID, second.Build.ID)
	resolvesTo(t, s, first.Template.ID, first.Build.ID)

	third := register(t, s, "app")
	build(t, s, third)
	resolvesTo(t, s, "app:default", third.Build.ID)
	// A pin keeps naming the old build.
	resolvesTo(t, s, "app:"+first.Build.ID, first.Build.ID)
	if _, _, err := s.Catalog.Resolve("app:" + second.Build.ID); failure.KindOf(err) != failure.NotFound {
		t.Fatalf("pinning a failed build must be not found, got %v", err)
	}
}

func TestRegisterSupersedesWaitingBuildsSharingATag(t *testing.T) {
	s := newStore(t)
	a := register(t, s, "app", "v1", "v2")
	other := register(t, s, "app", "v3")
	b := register(t, s, "app:v2")
	got, err := s.Catalog.Build(a.Template.ID, a.Build.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != e2b.BuildError || got.Reason == nil || got.Reason.Message != ReasonSuperseded {
		t.Fatalf("waiting build sharing tag v2: status %s reason %+v, want error %q", got.Status, got.Reason, ReasonSuperseded)
	}
	for _, id := range []string{other.Build.ID, b.Build.ID} {
		got, err := s.Catalog.Build(a.Template.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != e2b.BuildWaiting {
			t.Fatalf("build %s is %s, want waiting", id, got.Status)
		}
	}
	if _, _, err := s.Catalog.StartBuild(a.Template.ID, a.Build.ID, BuildRequest{}); err == nil || err.Error() != "build is not in waiting state" {
		t.Fatalf("starting a superseded build: %v", err)
	}
}

func TestRegisterNameRules(t *testing.T) {
	s := newStore(t)
	r := register(t, s, "app")
	if r.Build.Tags[0] != "default" || len(r.Build.Tags) != 1 {
		t.Fatalf("tags = %v, want [default]", r.Build.Tags)
	}
	cases := []struct {
		name string
		kind failure.Kind
	}{
		{"other/app", failure.Invalid},
		{"Bad Name!", failure.Invalid},
		{r.Template.ID, failure.Conflict},
	}
	for _, c := range cases {
		if _, err := s.Catalog.RegisterBuild(RegisterRequest{Name: c.name}); failure.KindOf(err) != c.kind {
			t.Errorf("register %q: %v, want kind %d", c.name, err, c.kind)
		}
	}
	if _, _, err := s.Catalog.DeleteTemplate("app"); err != nil {
		t.Fatal(err)
	}
	_, err := s.Catalog.RegisterBuild(RegisterRequest{Name: r.Template.ID})
	if want := fmt.Sprintf("Template '%s' has been deleted and cannot be rebuilt", r.Template.ID); failure.KindOf(err) != failure.NotFound || err.Error() != want {
		t.Fatalf("rebuild of a deleted ID: %v, want %q", err, want)
	}
	// As on E2B, which finds builds among its active templates.
	if _, err := s.Catalog.Build(r.Template.ID, r.Build.ID); failure.KindOf(err) != failure.NotFound {
		t.Fatalf("a build of a deleted template: %v, want not found", err)
	}
	again := register(t, s, "app")
	if again.Template.ID == r.Template.ID {
		t.Fatal("a deleted template's alias came back with its ID")
	}
}

func TestTagsAssignDeleteList(t *testing.T) {
	s := newStore(t)
	r := register(t, s, "app", "v1")
	build(t, s, r)
	id, tags, err := s.Catalog.AssignTags("app:v1", []string{"Prod", "stable"})
	if err != nil || id != r.Build.ID || len(tags) != 2 || tags[0] != "prod" {
		t.Fatalf("assign = %s %v %v", id, tags, err)
	}
	resolvesTo(t, s, "app:prod", r.Build.ID)
	if _, _, err := s.Catalog.AssignTags("app:nope", []string{"x"}); failure.KindOf(err) != failure.NotFound {
		t.Fatalf("assign from a missing tag: %v", err)
	}
	if _, _, err := s.Catalog.AssignTags("app:v1", []string{r.Build.ID}); failure.KindOf(err) != failure.Invalid {
		t.Fatalf("a UUID as a tag: %v", err)
	}
	list, err := s.Catalog.Tags(r.Template.ID)
	if err != nil || len(list) != 3 || list[0].Tag != "prod" || list[1].Tag != "stable" || list[2].Tag != "v1" {
		t.Fatalf("tags = %+v %v, want prod, stable, v1", list, err)
	}
	if err := s.Catalog.DeleteTags("app:v1", []string{"prod"}); failure.KindOf(err) != failure.Invalid {
		t.Fatalf("delete with a tag in the name: %v", err)
	}
	if err := s.Catalog.DeleteTags("app", []string{"default"}); failure.KindOf(err) != failure.Invalid {
		t.Fatalf("delete default: %v", err)
	}
	if err := s.Catalog.DeleteTags("app", []string{"prod"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Catalog.DeleteTags("app", []string{"prod"}); err != nil {
		t.Fatalf("deleting a tag the template lacks: %v, want nothing deleted and no error, as on E2B", err)
	}
	if _, _, err := s.Catalog.Resolve("app:prod"); failure.KindOf(err) != failure.NotFound {
		t.Fatalf("deleted tag still resolves: %v", err)
	}
}

// Concurrent tag moves are transactions: after many racing assignments the
// tag names whichever was committed last, and every one was recorded.
func TestConcurrentTagMovesAreAtomic(t *testing.T) {
	s := newStore(t)
	var builds []string
	for i := range 4 {
		r := register(t, s, "app", fmt.Sprintf("src%d", i))
		build(t, s, r)
		builds = append(builds, r.Build.ID)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Go(func() {
			_, _, err := s.Catalog.AssignTags(fmt.Sprintf("app:src%d", i%4), []string{"live", "also-live"})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	_, live, err := s.Catalog.Resolve("app:live")
	if err != nil {
		t.Fatal(err)
	}
	_, also, err := s.Catalog.Resolve("app:also-live")
	if err != nil {
		t.Fatal(err)
	}
	// Both tags were moved in one transaction each, so they agree.
	if live.ID != also.ID {
		t.Fatalf("tags moved together disagree: %s vs %s", live.ID, also.ID)
	}
	if !slices.Contains(builds, live.ID) {
		t.Fatalf("app:live names %s, none of the builds %v", live.ID, builds)
	}
}

func TestReopenLosesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path)
	r := register(t, s, "app", "v1")
	build(t, s, r)
	running := register(t, s, "app", "v2")
	if _, _, err := s.Catalog.StartBuild(r.Template.ID, running.Build.ID, BuildRequest{FromImage: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Catalog.AppendLogs(running.Build.ID, LogBound{}, []LogEntry{{Message: "hello", Level: "info", Step: "1"}}); err != nil {
		t.Fatal(err)
	}
	g, err := s.Uploads.CreateGrant(r.Template.ID, "h", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Uploads.CommitUpload(g.Token, "/archives/h.tar"); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = openStore(t, path)
	defer s.Close()
	resolvesTo(t, s, "app:v1", r.Build.ID)
	if n, err := s.Catalog.FailBuilding("the server restarted"); err != nil || n != 1 {
		t.Fatalf("FailBuilding = %d %v, want 1", n, err)
	}
	b, err := s.Catalog.Build(r.Template.ID, running.Build.ID)
	if err != nil || b.Status != e2b.BuildError || b.Reason.Message != "the server restarted" {
		t.Fatalf("interrupted build = %+v %v", b, err)
	}
	logs, err := s.Catalog.Logs(running.Build.ID, 0, -1, "")
	if err != nil || len(logs) != 1 || logs[0].Message != "hello" {
		t.Fatalf("logs = %+v %v", logs, err)
	}
	if p, ok, _ := s.Uploads.ArchivePath("h"); !ok || p != "/archives/h.tar" {
		t.Fatalf("archive = %q %v", p, ok)
	}
	if st, _ := s.Stats(); st.Uploads != 1 || st.Archives != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestGrantIsSingleUseAndExpires(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := Open(filepath.Join(t.TempDir(), "state.db"), "local", func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g, _ := s.Uploads.CreateGrant("t", "h", time.Minute)
	if _, err := s.Uploads.CommitUpload(g.Token, "/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Uploads.CommitUpload(g.Token, "/b"); failure.KindOf(err) != failure.Forbidden {
		t.Fatalf("replayed grant: %v", err)
	}
	// First write wins: a second grant for the same hash keeps /a.
	g2, _ := s.Uploads.CreateGrant("t", "h", time.Minute)
	if p, err := s.Uploads.CommitUpload(g2.Token, "/c"); err != nil || p != "/a" {
		t.Fatalf("second upload stored %q %v, want /a", p, err)
	}
	g3, _ := s.Uploads.CreateGrant("t", "h2", time.Minute)
	now = now.Add(time.Minute)
	if _, err := s.Uploads.Grant(g3.Token); failure.KindOf(err) != failure.Forbidden {
		t.Fatalf("expired grant: %v", err)
	}
}

func TestDeletedTemplateTakesNoBuildsOrSandboxes(t *testing.T) {
	s := newStore(t)
	r := register(t, s, "app")
	waiting := register(t, s, "app", "other")
	if _, _, err := s.Catalog.DeleteTemplate("app"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Catalog.StartBuild(r.Template.ID, waiting.Build.ID, BuildRequest{FromImage: "x"}); failure.KindOf(err) != failure.NotFound {
		t.Errorf("starting a build of a deleted template: %v", err)
	}
	if err := s.Sandboxes.CreateSandbox(Sandbox{ID: "i1", TemplateID: r.Template.ID}); failure.KindOf(err) != failure.NotFound {
		t.Errorf("a sandbox of a deleted template: %v", err)
	}
}

func BenchmarkResolve(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "state.db"), "local", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for range 20 {
		r, err := s.Catalog.RegisterBuild(RegisterRequest{Name: "app", CPUCount: 2, MemoryMB: 1024})
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := s.Catalog.StartBuild(r.Template.ID, r.Build.ID, BuildRequest{FromImage: "x"}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Catalog.FinishBuild(r.Template.ID, r.Build.ID, &BuildResult{Image: "i"}, nil); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if _, _, err := s.Catalog.Resolve("app"); err != nil {
			b.Fatal(err)
		}
	}
}
