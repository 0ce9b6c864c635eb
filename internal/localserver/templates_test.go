//go:build linux

package localserver

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

func TestEveryRequestNeedsTheAPIKey(t *testing.T) {
	ts := startServer(t, newFakeEngine(t))
	for _, path := range []string{"/v2/templates", "/templates", "/sandboxes", "/_local/stats"} {
		expectError(t, ts.request("GET", path, nil, "X-API-Key", ""), http.StatusUnauthorized, "X-API-Key")
		expectError(t, ts.request("GET", path, nil, "X-API-Key", "e2b_0000"), http.StatusUnauthorized, "Invalid API key")
	}
	expectError(t, ts.request("POST", "/v3/templates", e2b.TemplateBuildRequestV3{Name: "x"}, "X-API-Key", ""), http.StatusUnauthorized, "X-API-Key")
	// The header name is case-insensitive (the SDK spells it X-API-KEY).
	ts.call("GET", "/templates", nil, http.StatusOK, nil)
	expectError(t, ts.direct("GET", "/nope", nil), http.StatusNotFound, "no route for GET /nope")
	// The health probe needs no key.
	if resp := ts.request("GET", "/health", nil, "X-API-Key", ""); resp.StatusCode != http.StatusNoContent {
		t.Errorf("GET /health = %d, want 204", resp.StatusCode)
	}
}

func TestTemplateBuildFlow(t *testing.T) {
	ts := startServer(t, newFakeEngine(t))
	reg := ts.register("My-App:v1", "stable", "v1")
	if !slices.Equal(reg.Names, []string{"local/my-app"}) || !slices.Equal(reg.Aliases, []string{"my-app"}) {
		t.Errorf("names %v aliases %v, want [local/my-app] [my-app]", reg.Names, reg.Aliases)
	}
	if !slices.Equal(reg.Tags, []string{"v1", "stable"}) {
		t.Errorf("tags = %v, want [v1 stable]", reg.Tags)
	}
	if !e2b.IsTemplateID(reg.TemplateID) {
		t.Errorf("template ID %q is not 20 chars of [a-z0-9]", reg.TemplateID)
	}
	if u, err := uuid.Parse(reg.BuildID); err != nil || u.Version() != 4 {
		t.Errorf("build ID %q is not a UUID v4", reg.BuildID)
	}

	// Waiting: empty log arrays, "logs" present.
	resp := ts.request("GET", "/templates/"+reg.TemplateID+"/builds/"+reg.BuildID+"/status", nil)
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(raw), `"status":"waiting"`) || !strings.Contains(string(raw), `"logs":[]`) || !strings.Contains(string(raw), `"logEntries":[]`) {
		t.Errorf("waiting status = %s", raw)
	}

	ts.start(reg, e2b.TemplateBuildStartV2{
		FromImage: "base:latest", StartCmd: "serve", ReadyCmd: "true",
		Steps: []e2b.TemplateStep{run("echo 1"), {Type: "env", Args: []string{"A", "b"}}, {Type: "ARG", Args: []string{"C", "d"}}, {Type: "WORKDIR", Args: []string{"/app"}}},
	})
	info := ts.waitBuild(reg)
	if info.Status != e2b.BuildReady || info.Reason != nil {
		t.Fatalf("build = %+v, want ready", info)
	}
	all := ts.status(reg.TemplateID, reg.BuildID, "")
	if len(all.LogEntries) != 5 || all.LogEntries[0].Step != "base" || all.LogEntries[2].Step != "2" {
		t.Fatalf("log entries = %+v, want base + 4 steps", all.LogEntries)
	}
	if all.LogEntries[3].Message != "ENV C d" {
		t.Errorf("ARG was not passed to the engine as ENV: %q", all.LogEntries[3].Message)
	}
	page := ts.status(reg.TemplateID, reg.BuildID, "?logsOffset=2&limit=2")
	if len(page.LogEntries) != 2 || page.LogEntries[0].Message != all.LogEntries[2].Message {
		t.Errorf("page = %+v", page.LogEntries)
	}
	if info := ts.status(reg.TemplateID, reg.BuildID, "?level=info&logsOffset=0"); len(info.LogEntries) != 4 {
		t.Errorf("level=info gave %d entries, want 4 (the debug one filtered)", len(info.LogEntries))
	}
	if drained := ts.status(reg.TemplateID, reg.BuildID, "?logsOffset=5"); len(drained.LogEntries) != 0 {
		t.Errorf("offset past the end gave %+v", drained.LogEntries)
	}
	var logs e2b.TemplateBuildLogsResponse
	ts.call("GET", "/templates/"+reg.TemplateID+"/builds/"+reg.BuildID+"/logs?direction=backward&limit=2", nil, http.StatusOK, &logs)
	if len(logs.Logs) != 2 || logs.Logs[0].Message != all.LogEntries[4].Message {
		t.Errorf("backward logs = %+v", logs.Logs)
	}
	ts.call("GET", "/templates/"+reg.TemplateID+"/builds/"+reg.BuildID+"/logs?level=info&source=persistent", nil, http.StatusOK, &logs)
	if len(logs.Logs) != 4 {
		t.Errorf("forward info logs = %d, want 4", len(logs.Logs))
	}

	// The template in the lists and by ID.
	var list []e2b.Template
	ts.call("GET", "/templates", nil, http.StatusOK, &list)
	if len(list) != 1 || list[0].BuildID != reg.BuildID || list[0].BuildStatus != "ready" || list[0].EnvdVersion != "0.6.13" || list[0].CPUCount != 2 || list[0].MemoryMB != 1024 {
		t.Errorf("list = %+v", list)
	}
	var withBuilds e2b.TemplateWithBuilds
	ts.call("GET", "/templates/"+reg.TemplateID, nil, http.StatusOK, &withBuilds)
	if len(withBuilds.Builds) != 1 || withBuilds.Builds[0].Status != "ready" || withBuilds.Builds[0].FinishedAt == nil {
		t.Errorf("template with builds = %+v", withBuilds)
	}
	// Raw ID only.
	ts.expectError("GET", "/templates/my-app", nil, http.StatusNotFound, "not found")

	var alias e2b.TemplateAliasResponse
	for _, name := range []string{"my-app", "local%2Fmy-app", "my-app:v1", reg.TemplateID} {
		ts.call("GET", "/templates/aliases/"+name, nil, http.StatusOK, &alias)
		if alias.TemplateID != reg.TemplateID || alias.Public {
			t.Errorf("alias %s = %+v", name, alias)
		}
	}
	// An unescaped "/" in the name is accepted too (no spec operation has that shape).
	resp = ts.direct("GET", "/templates/aliases/local/my-app", nil)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("unescaped namespaced alias = %d", resp.StatusCode)
	}
	ts.expectError("GET", "/templates/aliases/my-app:nope", nil, http.StatusNotFound, "nope")
	ts.expectError("GET", "/templates/aliases/other", nil, http.StatusNotFound, "not found")
	ts.expectError("GET", "/templates/aliases/Bad!", nil, http.StatusBadRequest, "invalid")

	var names e2b.TemplateUpdateResponse
	ts.call("PATCH", "/v2/templates/local%2Fmy-app", map[string]bool{"public": true}, http.StatusOK, &names)
	if !slices.Equal(names.Names, []string{"local/my-app"}) {
		t.Errorf("patch names = %v", names.Names)
	}
	ts.call("GET", "/templates/aliases/my-app", nil, http.StatusOK, &alias)
	if !alias.Public {
		t.Error("template did not become public")
	}
	ts.call("PATCH", "/v2/templates/my-app", []byte("{}"), http.StatusOK, &names)
	ts.call("GET", "/templates/aliases/my-app", nil, http.StatusOK, &alias)
	if !alias.Public {
		t.Error("an empty PATCH changed the public flag")
	}
}

func TestListTemplatesV2Pages(t *testing.T) {
	ts := startServer(t, newFakeEngine(t))
	var ids []string
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		ids = append(ids, ts.register(name).TemplateID)
	}
	var got []string
	token := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		var page []e2b.Template
		path := "/v2/templates?limit=2"
		if token != "" {
			path += "&nextToken=" + token
		}
		h := ts.call("GET", path, nil, http.StatusOK, &page)
		if len(page) > 2 {
			t.Fatalf("page of %d > limit 2", len(page))
		}
		for _, p := range page {
			got = append(got, p.TemplateID)
		}
		if token = h.Get("X-Next-Token"); token == "" {
			break
		}
	}
	if !slices.Equal(got, ids) {
		t.Errorf("paged IDs %v, want %v", got, ids)
	}
}

func TestRegisterValidation(t *testing.T) {
	ts := startServer(t, newFakeEngine(t), serverOptions{configure: func(c *Config) { c.MaxCPUCount = 4 }})
	cpu := func(n int32) *int32 { return &n }
	ts.expectError("POST", "/v3/templates", e2b.TemplateBuildRequestV3{Name: "a", CPUCount: cpu(3)}, 400, "cpuCount 3")
	ts.expectError("POST", "/v3/templates", e2b.TemplateBuildRequestV3{Name: "a", CPUCount: cpu(6)}, 400, "at most 4")
	ts.expectError("POST", "/v3/templates", e2b.TemplateBuildRequestV3{Name: "a", MemoryMB: cpu(1025)}, 400, "memoryMB 1025")
	ts.expectError("POST", "/v3/templates", e2b.TemplateBuildRequestV3{Name: "a b"}, 400, "invalid alias")
	ts.expectError("POST", "/v3/templates", e2b.TemplateBuildRequestV3{Name: "other/a"}, 400, "namespace 'other' must match your team 'local'")
	ts.expectError("POST", "/v3/templates", e2b.TemplateBuildRequestV3{Name: "a", Tags: []string{uuid.NewString()}}, 400, "UUID")
	ts.expectError("POST", "/v3/templates", e2b.TemplateBuildRequestV3{}, 400, "name is required")
	expectError(t, ts.direct("POST", "/v3/templates", []byte("{")), 400, "invalid request body")

	// Deprecated alias works; cpu 1 is allowed.
	var reg e2b.TemplateRequestResponseV3
	ts.call("POST", "/v3/templates", e2b.TemplateBuildRequestV3{Alias: "legacy", CPUCount: cpu(1)}, 202, &reg)
	if !slices.Equal(reg.Tags, []string{"default"}) {
		t.Errorf("tags = %v, want [default]", reg.Tags)
	}
	again := ts.register("local/legacy")
	if again.TemplateID != reg.TemplateID || again.BuildID == reg.BuildID {
		t.Errorf("rebuild = %s/%s, want template %s with a new build", again.TemplateID, again.BuildID, reg.TemplateID)
	}
	ts.expectError("POST", "/v3/templates", e2b.TemplateBuildRequestV3{Name: reg.TemplateID}, 409, "Alias '"+reg.TemplateID+"' is already used")
	ts.call("DELETE", "/templates/legacy", nil, 204, nil)
	ts.expectError("POST", "/v3/templates", e2b.TemplateBuildRequestV3{Name: reg.TemplateID}, 404, "has been deleted and cannot be rebuilt")
	// What E2B answers the reads of a deleted template, its tags and its builds.
	ts.expectError("GET", "/templates/"+reg.TemplateID, nil, 404, "Template "+reg.TemplateID+" not found")
	ts.expectError("GET", "/templates/"+reg.TemplateID+"/tags", nil, 404, "template '"+reg.TemplateID+"' not found")
	ts.expectError("GET", "/templates/"+reg.TemplateID+"/builds/"+again.BuildID+"/status", nil, 400, "Build '"+again.BuildID+"' not found")
}

func TestStartBuildRules(t *testing.T) {
	eng := newFakeEngine(t)
	ts := startServer(t, eng)
	reg := ts.register("app")
	path := "/v2/templates/" + reg.TemplateID + "/builds/" + reg.BuildID
	ts.expectError("POST", path, e2b.TemplateBuildStartV2{FromImage: "a", FromTemplate: "b"}, 400, "cannot specify both")
	ts.expectError("POST", path, e2b.TemplateBuildStartV2{}, 400, "must specify either")
	ts.expectError("POST", path, e2b.TemplateBuildStartV2{FromImage: "a", Steps: []e2b.TemplateStep{{Type: "COPY", Args: []string{"a", "b", "", ""}}}}, 400, "no filesHash")
	missing := strings.Repeat("ab", 32)
	ts.expectError("POST", path, e2b.TemplateBuildStartV2{FromImage: "a", Steps: []e2b.TemplateStep{{Type: "copy", Args: []string{"a", "b", "", ""}, FilesHash: missing}}}, 400, missing+" were not uploaded")
	ts.expectError("POST", path, e2b.TemplateBuildStartV2{FromTemplate: "nope"}, 400, "fromTemplate 'nope'")
	ts.expectError("POST", "/v2/templates/"+reg.TemplateID+"/builds/"+uuid.NewString(), e2b.TemplateBuildStartV2{FromImage: "a"}, 404, "not found")
	ts.expectError("POST", "/v2/templates/"+reg.TemplateID+"/builds/not-a-uuid", e2b.TemplateBuildStartV2{FromImage: "a"}, 400, "not a UUID")
	// Nothing above started the build.
	if info := ts.status(reg.TemplateID, reg.BuildID, ""); info.Status != "waiting" {
		t.Fatalf("status after refused starts = %s", info.Status)
	}

	// An unknown step type fails the build, naming the type and the step.
	ts.start(reg, e2b.TemplateBuildStartV2{FromImage: "a", Steps: []e2b.TemplateStep{run("echo"), {Type: "HEALTHCHECK"}}})
	info := ts.waitBuild(reg)
	if info.Status != "error" || info.Reason == nil || info.Reason.Message != "command type HEALTHCHECK is not implemented" || info.Reason.Step != "2" {
		t.Fatalf("unknown step type: %+v", info)
	}
	ts.expectError("POST", path, e2b.TemplateBuildStartV2{FromImage: "a"}, 400, "build is not in waiting state")

	// A failing step: error with the step, its warn+ log entries in the reason.
	failed, info := ts.build("app", run("echo ok"), run("fail"))
	if info.Status != "error" || info.Reason.Step != "2" || info.Reason.Message != "command exited with code 1" {
		t.Fatalf("failed build: %+v", info)
	}
	if len(info.Reason.LogEntries) != 1 || info.Reason.LogEntries[0].Message != "it failed" {
		t.Errorf("reason log entries = %+v, want the step's error line", info.Reason.LogEntries)
	}
	// A failure the engine cannot attribute to a step.
	_, info = ts.build("app", run("crash"))
	if info.Status != "error" || info.Reason.Message != "the engine lost the container" || info.Reason.Step != "" {
		t.Fatalf("crashed build: %+v", info)
	}
	ts.expectError("GET", "/templates/"+failed.TemplateID+"/builds/"+uuid.NewString()+"/status", nil, 400, "Build '")
	expectError(t, ts.direct("GET", "/templates/"+failed.TemplateID+"/builds/"+failed.BuildID+"/status?level=loud", nil), 400, "level")

	// fromTemplate builds on the resolved ready build's image and state.
	base, info := ts.build("base-tpl", e2b.TemplateStep{Type: "ENV", Args: []string{"FROM_BASE", "1"}})
	if info.Status != "ready" {
		t.Fatal(info)
	}
	child := ts.register("child")
	ts.start(child, e2b.TemplateBuildStartV2{FromTemplate: "base-tpl"})
	if info := ts.waitBuild(child); info.Status != "ready" {
		t.Fatal(info)
	}
	spec := lastBuildSpec(t, eng, child.BuildID)
	if spec.BaseImage != "fake/"+base.TemplateID+":"+base.BuildID || spec.PullBase || spec.FromBuild == nil ||
		spec.FromBuild.Env["FROM_BASE"] != "1" || spec.FromBuild.User != "user" {
		t.Errorf("child spec base = %q pull %v from %+v", spec.BaseImage, spec.PullBase, spec.FromBuild)
	}
}

func TestTagsEndpoints(t *testing.T) {
	ts := startServer(t, newFakeEngine(t))
	first, _ := ts.build("app")
	second, _ := ts.build("app")
	var assigned e2b.AssignedTemplateTags
	ts.call("POST", "/templates/tags", e2b.AssignTemplateTagsRequest{Target: "app:" + first.BuildID, Tags: []string{"old"}}, 201, &assigned)
	if assigned.BuildID != first.BuildID || !slices.Equal(assigned.Tags, []string{"old"}) {
		t.Errorf("assign by build ID = %+v", assigned)
	}
	ts.call("POST", "/templates/tags", e2b.AssignTemplateTagsRequest{Target: "local/app", Tags: []string{"prod", "Stable"}}, 201, &assigned)
	if assigned.BuildID != second.BuildID || !slices.Equal(assigned.Tags, []string{"prod", "stable"}) {
		t.Errorf("assign from default = %+v", assigned)
	}
	ts.expectError("POST", "/templates/tags", e2b.AssignTemplateTagsRequest{Target: "app:missing", Tags: []string{"x"}}, 404, "tag 'missing'")
	ts.expectError("POST", "/templates/tags", e2b.AssignTemplateTagsRequest{Target: "nope:v1", Tags: []string{"x"}}, 404, "template 'nope' not found")

	var tags []e2b.TemplateTag
	ts.call("GET", "/templates/app/tags", nil, 200, &tags)
	got := map[string]string{}
	for _, tag := range tags {
		got[tag.Tag] = tag.BuildID
	}
	want := map[string]string{"default": second.BuildID, "old": first.BuildID, "prod": second.BuildID, "stable": second.BuildID}
	if len(got) != len(want) {
		t.Errorf("tags = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("tag %s -> %s, want %s", k, got[k], v)
		}
	}
	ts.expectError("DELETE", "/templates/tags", e2b.DeleteTemplateTagsRequest{Name: "app:prod", Tags: []string{"prod"}}, 400, "must not contain a tag")
	ts.expectError("DELETE", "/templates/tags", e2b.DeleteTemplateTagsRequest{Name: "app", Tags: []string{"default"}}, 400, "'default' tag cannot be deleted")
	ts.call("DELETE", "/templates/tags", e2b.DeleteTemplateTagsRequest{Name: "app", Tags: []string{"prod", "old"}}, 204, nil)
	ts.call("GET", "/templates/"+first.TemplateID+"/tags", nil, 200, &tags)
	if len(tags) != 2 {
		t.Errorf("tags after delete = %+v, want default and stable", tags)
	}
	// A tag the template no longer has deletes nothing, as on E2B.
	ts.call("DELETE", "/templates/tags", e2b.DeleteTemplateTagsRequest{Name: "app", Tags: []string{"prod"}}, 204, nil)
}

// A rebuild never takes a tag from the last good build while it runs or
// when it fails, though the tag list names it from its registration; starting a newer build sharing a tag cancels a running one.
func TestRebuildKeepsTagUntilReadyAndSupersedes(t *testing.T) {
	eng := newFakeEngine(t)
	ts := startServer(t, eng)
	good, _ := ts.build("app")
	tagTarget := func() string {
		var tags []e2b.TemplateTag
		ts.call("GET", "/templates/app/tags", nil, 200, &tags)
		for _, tag := range tags {
			if tag.Tag == "default" {
				return tag.BuildID
			}
		}
		return ""
	}
	running := ts.register("app")
	ts.start(running, e2b.TemplateBuildStartV2{FromImage: "a", Steps: []e2b.TemplateStep{run("block")}})
	lastBuildSpec(t, eng, running.BuildID) // the engine has it
	// Listed at the rebuild, as E2B lists a tag's newest assignment; resolved to the
	// good build (the target of a tag assignment resolves as a sandbox start does).
	if got := tagTarget(); got != running.BuildID {
		t.Fatalf("while a rebuild runs the list has default -> %s, want the rebuild %s", got, running.BuildID)
	}
	var resolved e2b.AssignedTemplateTags
	ts.call("POST", "/templates/tags", e2b.AssignTemplateTagsRequest{Target: "app:default", Tags: []string{"probe"}}, 201, &resolved)
	if resolved.BuildID != good.BuildID {
		t.Fatalf("while a rebuild runs app:default resolves to %s, want the good build %s", resolved.BuildID, good.BuildID)
	}
	if info := ts.status(running.TemplateID, running.BuildID, ""); info.Status != "building" {
		t.Fatalf("status = %s, want building", info.Status)
	}
	// Registering (waiting) supersedes nothing that runs; starting does.
	newer := ts.register("app")
	waitingOther := ts.register("app", "other")
	ts.start(newer, e2b.TemplateBuildStartV2{FromImage: "a"})
	if info := ts.waitBuild(running); info.Status != "error" || info.Reason.Message != store.ReasonSuperseded {
		t.Fatalf("superseded running build = %+v", info)
	}
	if info := ts.waitBuild(newer); info.Status != "ready" {
		t.Fatalf("newer build = %+v", info)
	}
	if got := tagTarget(); got != newer.BuildID {
		t.Fatalf("after the newer build is ready default -> %s, want %s", got, newer.BuildID)
	}
	if info := ts.status(waitingOther.TemplateID, waitingOther.BuildID, ""); info.Status != "waiting" {
		t.Errorf("a waiting build with another tag became %s", info.Status)
	}
}

// lastBuildSpec waits until the engine was asked to run buildID.
func lastBuildSpec(t *testing.T, eng *fakeEngine, buildID string) engine.BuildSpec {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case spec := <-eng.builds:
			if spec.BuildID == buildID {
				return spec
			}
		case <-timeout:
			t.Fatalf("the engine was not asked to run build %s within 30 s", buildID)
		}
	}
}

// A build whose log cannot be stored (a full disk) fails, saying so,
// instead of reporting ready with its log silently dropped.
func TestBuildFailsWhenItsLogCannotBeStored(t *testing.T) {
	eng := newFakeEngine(t)
	ts := startServer(t, eng, serverOptions{configure: func(c *Config) {
		c.appendLogs = func(string, []store.LogEntry) error {
			return fmt.Errorf("store log: %w", syscall.ENOSPC)
		}
	}})
	_, info := ts.build("app", e2b.TemplateStep{Type: "RUN", Args: []string{"true"}})
	if info.Status != "error" || info.Reason == nil || !strings.Contains(info.Reason.Message, "build log") || !strings.Contains(info.Reason.Message, "no space left") {
		t.Fatalf("build = %+v, want an error naming the lost build log", info)
	}
}

// A build that ends after its template was deleted made an image no record
// owns: the server removes it.
func TestBuildEndingAfterItsTemplateRemovesItsImage(t *testing.T) {
	eng := newFakeEngine(t)
	ts := startServer(t, eng)
	running := ts.register("gone")
	ts.start(running, e2b.TemplateBuildStartV2{FromImage: "a", Steps: []e2b.TemplateStep{run("block")}})
	lastBuildSpec(t, eng, running.BuildID)
	ts.call("DELETE", "/templates/gone", nil, http.StatusNoContent, nil)
	close(eng.release)
	image := "fake/" + running.TemplateID + ":" + running.BuildID
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		eng.mu.Lock()
		removed := slices.Contains(eng.removedImages, image)
		eng.mu.Unlock()
		if removed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the image %s of a build that ended after its template was never removed", image)
		}
	}
}
