package templatebuild

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/openapitest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
)

// fakeE2B is a stand-in for the template endpoints of the E2B API, every request and
// answer checked against E2B's OpenAPI spec, with E2B's rules for builds and tags
// (design/e2b-api.md, "Names, aliases, tags"): registering a build fails the template's
// waiting builds that share a tag with it ("superseded by a newer one"), starting one
// cancels its in-progress builds that share a tag, the tag list names each tag's newest
// assignment whatever its build's status, and tags move only to ready builds.
//
// A started build runs for as many seconds as its RUN steps sleep ("sleep 2") and fails
// at the first RUN step that exits non-zero ("exit 3"); it logs one line per step, the
// step's description.
type fakeE2B struct {
	URL, APIKey string
	// uploadURL is where archives are PUT: another server, as E2B's storage is.
	uploadURL string

	mu        sync.Mutex
	templates map[string]*fakeTemplate
	archives  map[string]bool
	uploads   int
	n         int
}

type fakeTemplate struct {
	id, name string
	builds   []*fakeBuild
	// assignments are the tag rows, oldest first.
	assignments []fakeAssignment
}

type fakeAssignment struct {
	tag, buildID string
	at           time.Time
}

type fakeBuild struct {
	id         string
	tags       []string
	status     string
	reason     *e2b.BuildStatusReason
	cpu, mem   int32
	createdAt  time.Time
	finishesAt time.Time
	failsAt    string // the step that fails, "" when none does
	logs       []e2b.BuildLogEntry
}

// fakeBaseImage is the base image of the tests' builds; the stand-in runs nothing.
const fakeBaseImage = "e2b-test-base:latest"

func newFakeE2B(t *testing.T) *fakeE2B {
	t.Helper()
	f := &fakeE2B{APIKey: "e2b_0123456789abcdef", templates: map[string]*fakeTemplate{}, archives: map[string]bool{}}
	storage := httptest.NewServer(http.HandlerFunc(f.storeArchive))
	t.Cleanup(storage.Close)
	f.uploadURL = storage.URL
	api := httptest.NewServer(openapitest.E2B(t).Middleware(t, http.HandlerFunc(f.serve)))
	t.Cleanup(api.Close)
	f.URL = api.URL
	return f
}

// client is a client of the stand-in at url (the stand-in's own when empty).
func (f *fakeE2B) client(t *testing.T, url string) *e2bapi.Client {
	t.Helper()
	api, err := e2bapi.New(e2bapi.Config{BaseURL: cmpOr(url, f.URL), APIKey: f.APIKey, MaxRetries: 2})
	if err != nil {
		t.Fatal(err)
	}
	return api
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// uploadCount is how many archives were uploaded.
func (f *fakeE2B) uploadCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.uploads
}

var (
	templatePath = regexp.MustCompile(`^/templates/([a-z0-9]+)$`)
	tagsPath     = regexp.MustCompile(`^/templates/([a-z0-9]+)/tags$`)
	filesPath    = regexp.MustCompile(`^/templates/([a-z0-9]+)/files/([0-9a-f]+)$`)
	statusPath   = regexp.MustCompile(`^/templates/([a-z0-9]+)/builds/([0-9a-f-]+)/status$`)
	startPath    = regexp.MustCompile(`^/v2/templates/([a-z0-9]+)/builds/([0-9a-f-]+)$`)
	sleepPattern = regexp.MustCompile(`sleep (\d+)`)
	exitPattern  = regexp.MustCompile(`exit ([1-9]\d*)`)
)

func (f *fakeE2B) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now().UTC()
	for _, tpl := range f.templates {
		for _, b := range tpl.builds {
			b.advance(now)
		}
	}
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	fail := func(status int, msg string) { reply(status, e2b.Error{Code: status, Message: msg}) }
	var m []string
	match := func(method string, re *regexp.Regexp) bool {
		m = re.FindStringSubmatch(r.URL.Path)
		return r.Method == method && m != nil
	}
	template := func() *fakeTemplate {
		tpl := f.templates[m[1]]
		if tpl == nil {
			fail(http.StatusNotFound, fmt.Sprintf("template '%s' not found", m[1]))
		}
		return tpl
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v3/templates":
		var req e2b.TemplateBuildRequestV3
		_ = json.NewDecoder(r.Body).Decode(&req)
		reply(http.StatusAccepted, f.register(req, now))
	case match(http.MethodGet, templatePath):
		if tpl := template(); tpl != nil {
			reply(http.StatusOK, tpl.withBuilds(now))
		}
	case match(http.MethodGet, tagsPath):
		if tpl := template(); tpl != nil {
			reply(http.StatusOK, tpl.tags())
		}
	case r.Method == http.MethodPost && r.URL.Path == "/templates/tags":
		var req e2b.AssignTemplateTagsRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		name, target, _ := strings.Cut(req.Target, ":")
		tpl := f.byName(name)
		b := tpl.resolve(target)
		if b == nil {
			fail(http.StatusNotFound, fmt.Sprintf("tag '%s' of template '%s' not found", target, name))
			return
		}
		for _, tag := range req.Tags {
			tpl.assign(tag, b.id, now)
		}
		reply(http.StatusCreated, e2b.AssignedTemplateTags{Tags: req.Tags, BuildID: b.id})
	case match(http.MethodGet, filesPath):
		if template() != nil {
			reply(http.StatusCreated, e2b.TemplateBuildFileUpload{Present: f.archives[m[2]], URL: f.uploadURL + "/" + m[2]})
		}
	case match(http.MethodPost, startPath):
		tpl := template()
		if tpl == nil {
			return
		}
		b := tpl.build(m[2])
		if b == nil || b.status != e2b.BuildWaiting {
			fail(http.StatusBadRequest, "build is not in waiting state")
			return
		}
		var req e2b.TemplateBuildStartV2
		_ = json.NewDecoder(r.Body).Decode(&req)
		for _, o := range tpl.builds {
			if o.status == e2b.BuildBuilding && sharesTag(o, b) {
				o.status, o.reason = e2b.BuildError, &e2b.BuildStatusReason{Message: "build was cancelled"}
			}
		}
		b.start(req, now)
		w.WriteHeader(http.StatusAccepted)
	case match(http.MethodGet, statusPath):
		tpl := template()
		if tpl == nil {
			return
		}
		b := tpl.build(m[2])
		if b == nil {
			fail(http.StatusBadRequest, fmt.Sprintf("build '%s' not found", m[2]))
			return
		}
		offset, _ := strconv.Atoi(r.URL.Query().Get("logsOffset"))
		page := []e2b.BuildLogEntry{}
		if b.status == e2b.BuildReady || b.status == e2b.BuildError || b.status == e2b.BuildBuilding {
			if offset < len(b.logs) {
				page = b.logs[offset:min(len(b.logs), offset+maxLogPage)]
			}
		}
		reply(http.StatusOK, e2b.TemplateBuildInfo{TemplateID: tpl.id, BuildID: b.id, Status: b.status,
			Logs: []string{}, LogEntries: page, Reason: b.reason})
	default:
		fail(http.StatusNotFound, "no such endpoint in the stand-in: "+r.Method+" "+r.URL.Path)
	}
}

// register is POST /v3/templates: a waiting build of the template the name names (a new
// one when none does), carrying its tags (default when none) from now on, and failing
// the template's waiting builds that share one of them.
func (f *fakeE2B) register(req e2b.TemplateBuildRequestV3, now time.Time) e2b.TemplateRequestResponseV3 {
	f.n++
	tpl := f.byName(req.Name)
	if tpl == nil {
		tpl = &fakeTemplate{id: fmt.Sprintf("tpl%017d", f.n), name: req.Name}
		f.templates[tpl.id] = tpl
	}
	b := &fakeBuild{id: fmt.Sprintf("00000000-0000-4000-8000-%012d", f.n), tags: req.Tags, status: e2b.BuildWaiting,
		cpu: 2, mem: 1024, createdAt: now}
	if len(b.tags) == 0 {
		b.tags = []string{e2b.DefaultTag}
	}
	if req.CPUCount != nil {
		b.cpu = *req.CPUCount
	}
	if req.MemoryMB != nil {
		b.mem = *req.MemoryMB
	}
	for _, o := range tpl.builds {
		if o.status == e2b.BuildWaiting && sharesTag(o, b) {
			o.status, o.reason = e2b.BuildError, &e2b.BuildStatusReason{Message: "superseded by a newer one"}
		}
	}
	tpl.builds = append(tpl.builds, b)
	for _, tag := range b.tags {
		tpl.assign(tag, b.id, now)
	}
	return e2b.TemplateRequestResponseV3{TemplateID: tpl.id, BuildID: b.id, Names: []string{tpl.name}, Tags: b.tags, Aliases: []string{tpl.name}}
}

func (f *fakeE2B) byName(name string) *fakeTemplate {
	for _, tpl := range f.templates {
		if tpl.name == name || tpl.id == name {
			return tpl
		}
	}
	return nil
}

// storeArchive is the storage's PUT of an archive.
func (f *fakeE2B) storeArchive(w http.ResponseWriter, r *http.Request) {
	if _, err := io.Copy(io.Discard, r.Body); err != nil || r.Method != http.MethodPut {
		http.Error(w, "bad upload", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.archives[strings.TrimPrefix(r.URL.Path, "/")] = true
	f.uploads++
	f.mu.Unlock()
}

func sharesTag(a, b *fakeBuild) bool {
	return slices.ContainsFunc(a.tags, func(t string) bool { return slices.Contains(b.tags, t) })
}

// start runs the build on the request's steps.
func (b *fakeBuild) start(req e2b.TemplateBuildStartV2, now time.Time) {
	b.status = e2b.BuildBuilding
	var took time.Duration
	for i, s := range req.Steps {
		step := strconv.Itoa(i + 1)
		b.logs = append(b.logs, e2b.BuildLogEntry{Timestamp: now, Level: e2b.LogInfo, Step: step, Message: s.Describe()})
		if s.Type != steps.Run || b.failsAt != "" {
			continue
		}
		command := s.RunArgs().Command
		for _, sleep := range sleepPattern.FindAllStringSubmatch(command, -1) {
			n, _ := strconv.Atoi(sleep[1])
			took += time.Duration(n) * time.Second
		}
		if exitPattern.MatchString(command) {
			b.failsAt = step
		}
	}
	b.finishesAt = now.Add(took)
}

// advance ends a build in progress whose time has come.
func (b *fakeBuild) advance(now time.Time) {
	if b.status != e2b.BuildBuilding || now.Before(b.finishesAt) {
		return
	}
	b.status = e2b.BuildReady
	if b.failsAt != "" {
		b.status, b.reason = e2b.BuildError, &e2b.BuildStatusReason{Message: "command exited with a non-zero code", Step: b.failsAt}
	}
}

func (tpl *fakeTemplate) build(id string) *fakeBuild {
	i := slices.IndexFunc(tpl.builds, func(b *fakeBuild) bool { return b.id == id })
	if i < 0 {
		return nil
	}
	return tpl.builds[i]
}

func (tpl *fakeTemplate) assign(tag, buildID string, now time.Time) {
	tpl.assignments = append(tpl.assignments, fakeAssignment{tag: tag, buildID: buildID, at: now})
}

// resolve is the ready build target names: a build ID, or the tag's newest assignment
// to a ready build.
func (tpl *fakeTemplate) resolve(target string) *fakeBuild {
	if tpl == nil {
		return nil
	}
	if b := tpl.build(target); b != nil && b.status == e2b.BuildReady {
		return b
	}
	for _, a := range slices.Backward(tpl.assignments) {
		if b := tpl.build(a.buildID); a.tag == target && b.status == e2b.BuildReady {
			return b
		}
	}
	return nil
}

// tags is the tag list: every tag's newest assignment, sorted by tag.
func (tpl *fakeTemplate) tags() []e2b.TemplateTag {
	newest := map[string]fakeAssignment{}
	for _, a := range tpl.assignments {
		newest[a.tag] = a
	}
	out := []e2b.TemplateTag{}
	for _, a := range newest {
		out = append(out, e2b.TemplateTag{Tag: a.tag, BuildID: a.buildID, CreatedAt: a.at})
	}
	slices.SortFunc(out, func(a, b e2b.TemplateTag) int { return strings.Compare(a.Tag, b.Tag) })
	return out
}

func (tpl *fakeTemplate) withBuilds(now time.Time) e2b.TemplateWithBuilds {
	out := e2b.TemplateWithBuilds{TemplateID: tpl.id, Aliases: []string{tpl.name}, Names: []string{tpl.name},
		CreatedAt: tpl.builds[0].createdAt, UpdatedAt: now, Builds: []e2b.TemplateBuild{}}
	for _, b := range tpl.builds {
		out.Builds = append(out.Builds, e2b.TemplateBuild{BuildID: b.id, Status: b.status, CreatedAt: b.createdAt,
			UpdatedAt: now, CPUCount: b.cpu, MemoryMB: b.mem})
	}
	return out
}
