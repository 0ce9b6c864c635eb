package docker

import (
	"archive/tar"
	"context"
	"encoding/json"
	"io"
	"maps"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
)

// imageFile reads one file of an image through a container that never starts.
func imageFile(t *testing.T, d *Docker, ref, name string) string {
	t.Helper()
	c, err := d.cli.ContainerCreate(t.Context(), &container.Config{Image: ref, Cmd: []string{"/bin/true"}}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := removeContainer(context.Background(), d.cli, c.ID); err != nil {
			t.Error(err)
		}
	}()
	rc, _, err := d.cli.CopyFromContainer(t.Context(), c.ID, name)
	if err != nil {
		t.Fatalf("%s in %s: %v", name, ref, err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	if _, err := tr.Next(); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(tr)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestBuildLayerCache rebuilds one template while changing, forcing and
// keeping its steps, and checks from the image which steps ran again:
// each RUN writes a fresh random value.
func TestBuildLayerCache(t *testing.T) {
	d := newTestDocker(t, "")
	ctxDir := t.TempDir()
	writeFiles(t, ctxDir, map[string]string{"f.txt": "first\n"})
	first := contextArchive(t, ctxDir, "f.txt")
	writeFiles(t, ctxDir, map[string]string{"f.txt": "second\n"})
	second := contextArchive(t, ctxDir, "f.txt")
	uuid := "cat /proc/sys/kernel/random/uuid > "
	steps := func() []e2b.TemplateStep {
		return []e2b.TemplateStep{
			{Type: "ENV", Args: []string{"GREETING", "hi"}},                                         // 1
			{Type: "WORKDIR", Args: []string{"/app"}},                                               // 2
			{Type: "RUN", Args: []string{uuid + "/s3", "root"}},                                     // 3
			{Type: "COPY", Args: []string{"f.txt", "/f.txt", "", ""}, FilesHash: "first"},           // 4
			{Type: "RUN", Args: []string{uuid + "/s5", "root"}},                                     // 5
			{Type: "RUN", Args: []string{uuid + "s6; echo \"$GREETING from $(pwd) as $(id -un)\""}}, // 6
		}
	}
	archives := map[string]string{"first": first, "second": second}
	templateID := randomID("tpl")
	type built struct {
		res   *engine.BuildResult
		log   *buildLog
		files map[string]string
	}
	build := func(force bool, st []e2b.TemplateStep) built {
		t.Helper()
		log := &buildLog{}
		res, err := d.Build(t.Context(), engine.BuildSpec{
			TemplateID: templateID, BuildID: randomID("build"), BaseImage: dockerEnv.baseImage,
			Force: force, Steps: st, Archives: archives, Log: log.add,
		})
		if err != nil {
			t.Fatalf("build: %v\nlog:\n%s", err, log)
		}
		removeImageAtEnd(t, d, res.Image)
		files := map[string]string{}
		for _, f := range []string{"/s3", "/s5", "/app/s6", "/f.txt"} {
			files[f] = imageFile(t, d, res.Image, f)
		}
		return built{res, log, files}
	}
	// cached checks which of base and the steps were reused, by the log.
	cached := func(b built, want ...string) {
		t.Helper()
		for _, step := range []string{"base", "1", "2", "3", "4", "5", "6"} {
			isCached := b.log.has(step, "CACHED [")
			if wanted := strings.Contains(" "+strings.Join(want, " ")+" ", " "+step+" "); isCached != wanted {
				t.Errorf("step %s cached = %v, want %v; log:\n%s", step, isCached, wanted, b.log)
			}
		}
	}
	same := func(a, b built, names ...string) {
		t.Helper()
		for _, n := range names {
			if a.files[n] != b.files[n] {
				t.Errorf("%s changed (%q, %q): its step ran again", n, a.files[n], b.files[n])
			}
		}
	}
	differ := func(a, b built, names ...string) {
		t.Helper()
		for _, n := range names {
			if a.files[n] == b.files[n] {
				t.Errorf("%s is unchanged (%q): its step did not run again", n, a.files[n])
			}
		}
	}

	fresh := build(false, steps())
	cached(fresh)
	if !fresh.log.has("6", "hi from /app as user") {
		t.Errorf("log:\n%s", fresh.log)
	}

	again := build(false, steps())
	cached(again, "base", "1", "2", "3", "4", "5", "6")
	same(fresh, again, "/s3", "/s5", "/app/s6")
	if again.res.User != fresh.res.User || again.res.Workdir != fresh.res.Workdir || !maps.Equal(again.res.Env, fresh.res.Env) {
		t.Errorf("a cached build ends with %+v, a fresh one with %+v", again.res, fresh.res)
	}

	st := steps()
	st[5].Args[0] += "; echo changed"
	trailing := build(false, st)
	cached(trailing, "base", "1", "2", "3", "4", "5")
	same(fresh, trailing, "/s3", "/s5")
	differ(fresh, trailing, "/app/s6")
	if !trailing.log.has("6", "hi from /app as user") || !trailing.log.has("6", "changed") {
		t.Errorf("the step after cached ones does not see their env, workdir and user:\n%s", trailing.log)
	}

	st = steps()
	st[4].Force = true
	forced := build(false, st)
	cached(forced, "base", "1", "2", "3", "4")
	same(fresh, forced, "/s3")
	differ(fresh, forced, "/s5", "/app/s6")

	st = steps()
	st[3].FilesHash = "second"
	copied := build(false, st)
	cached(copied, "base", "1", "2", "3")
	same(fresh, copied, "/s3")
	differ(fresh, copied, "/s5", "/app/s6")
	if copied.files["/f.txt"] != "second" {
		t.Errorf("/f.txt = %q after the files changed", copied.files["/f.txt"])
	}

	all := build(true, steps())
	cached(all)
	if !all.log.has("base", "Created user user") {
		t.Errorf("a forced build reused the base phase:\n%s", all.log)
	}
	differ(fresh, all, "/s3", "/s5", "/app/s6")

	if n := len(containers(t, d)); n != 0 {
		t.Errorf("%d containers left after the builds", n)
	}
}

// TestPruneLayers bounds the cache to the most recently used layers, keeps
// what builds still need and leaves no image behind.
func TestPruneLayers(t *testing.T) {
	t.Parallel()
	d := newTestDocker(t, "")
	d.opts.LayerCacheSize = 2
	spec := engine.BuildSpec{
		TemplateID: randomID("tpl"), BuildID: randomID("build"), BaseImage: dockerEnv.baseImage,
		Steps: []e2b.TemplateStep{
			{Type: "RUN", Args: []string{"echo 1 > /one", "root"}},
			{Type: "RUN", Args: []string{"echo 2 > /two", "root"}},
			{Type: "RUN", Args: []string{"echo 3 > /three", "root"}},
		},
	}
	res, err := d.Build(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	ours := func(kind string, all bool) []image.Summary {
		t.Helper()
		args := filters.NewArgs(filters.Arg("label", d.labels.key("instance")+"="+d.labels.instance))
		if kind != "" {
			args.Add("label", d.labels.key("kind")+"="+kind)
		}
		list, err := d.cli.ImageList(t.Context(), image.ListOptions{All: all, Filters: args})
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	if n := len(ours(kindLayer, false)); n != 2 {
		t.Errorf("%d layers kept, want the cache size 2", n)
	}
	// The newest survive: a rebuild reuses the last steps.
	var log buildLog
	spec.BuildID, spec.Log = randomID("build"), log.add
	res2, err := d.Build(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if !log.has("3", "CACHED [builder 3/3]") {
		t.Errorf("the newest layer was evicted:\n%s", &log)
	}

	// A layer that lost its tag is nobody's.
	c, err := d.cli.ContainerCreate(t.Context(), &container.Config{Image: dockerEnv.baseImage, Cmd: []string{"true"}}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	removeContainerAtEnd(t, d, c.ID)
	if _, err := d.cli.ContainerCommit(t.Context(), c.ID, container.CommitOptions{Config: &container.Config{Labels: map[string]string{
		d.labels.key("instance"): d.labels.instance, d.labels.key("kind"): kindLayer,
	}}}); err != nil {
		t.Fatal(err)
	}

	if err := d.PruneLayers(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	if n := len(ours(kindLayer, false)); n != 0 {
		t.Errorf("%d layers left after pruning to 0", n)
	}
	// The builds' images stand on the pruned layers and still work.
	for _, r := range []*engine.BuildResult{res, res2} {
		if got := imageFile(t, d, r.Image, "/three"); got != "3" {
			t.Errorf("%s: /three = %q", r.Image, got)
		}
		if err := d.RemoveImage(t.Context(), r.Image); err != nil {
			t.Fatal(err)
		}
	}
	if left := ours("", true); len(left) != 0 {
		t.Errorf("%d images of the instance left: %+v", len(left), left)
	}
}

// A layer records the shell its chain started with (the test image has no
// bash) and the user.
func TestLayerStateKeepsShell(t *testing.T) {
	t.Parallel()
	d := newTestDocker(t, "")
	spec := engine.BuildSpec{
		TemplateID: randomID("tpl"), BuildID: randomID("build"), BaseImage: dockerEnv.baseImage,
		Steps: []e2b.TemplateStep{{Type: "RUN", Args: []string{"true"}}},
	}
	res, err := d.Build(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	removeImageAtEnd(t, d, res.Image)
	layers, err := d.cli.ImageList(t.Context(), image.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", d.labels.key("instance")+"="+d.labels.instance),
		filters.Arg("label", d.labels.key("kind")+"="+kindLayer),
	)})
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 2 {
		t.Fatalf("%d layers, want 2 (the default user and step 1)", len(layers))
	}
	for _, l := range layers {
		var st struct {
			User, Shell string
			Login       bool
		}
		if err := json.Unmarshal([]byte(l.Labels[d.labels.key("layer-state")]), &st); err != nil {
			t.Fatalf("layer %v: state %v", l.RepoTags, err)
		}
		if st.Shell != "/bin/sh" || st.Login || st.User != "user" {
			t.Errorf("layer %v state %+v, want /bin/sh without login and user user", l.RepoTags, st)
		}
	}
}
