package docker

import (
	"context"
	"crypto/rand"
	"slices"
	"testing"

	"github.com/docker/docker/api/types/container"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
)

// newPruneTestDocker is newTestDocker under the label prefix Prune knows,
// the server's.
func newPruneTestDocker(t *testing.T) *Docker {
	t.Helper()
	return newTestDockerWith(t, func(o *DockerOptions) { o.Network, o.LabelPrefix = engine.NetworkNone, defaultLabelPrefix })
}

// buildImage builds an image of a new template whose one RUN step writes
// 1 MiB, and returns its reference.
func buildImage(t *testing.T, d *Docker) string {
	t.Helper()
	res, err := d.Build(t.Context(), engine.BuildSpec{
		TemplateID: randomID("tpl"), BuildID: randomID("build"), BaseImage: dockerEnv.baseImage,
		// Its own marker: the two builds of a test share no layer.
		Steps: []e2b.TemplateStep{{Type: "RUN", Args: []string{"echo " + randomID("m") + " > /marker; head -c 1048576 /dev/urandom > /big", "root"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return res.Image
}

// Prune keeps what the records claim (a sandbox's container, a template's
// image, the envd volume the kept container mounts) and removes the rest
// of the instance: a build container, an ended sandbox's container,
// another template's image and the layer cache, each listed with its size.
// Pruned again with nothing claimed, the instance has nothing left.
func TestPruneKeepsWhatRecordsClaim(t *testing.T) {
	t.Parallel()
	d := newPruneTestDocker(t)
	kept, dropped := buildImage(t, d), buildImage(t, d)
	token := rand.Text()
	start := func(image string) *engine.Sandbox {
		sb, err := d.StartSandbox(t.Context(), engine.SandboxSpec{SandboxID: randomID("sb"), Image: image, User: "root", AccessToken: token})
		if err != nil {
			t.Fatal(err)
		}
		return sb
	}
	live, ended := start(kept), start(dockerEnv.baseImage)
	build, err := d.cli.ContainerCreate(t.Context(), &container.Config{Image: dockerEnv.baseImage, Cmd: []string{"true"}, Labels: d.labels.of(kindBuild, "tpl", randomID("build"), "")},
		&container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}

	report, err := Prune(t.Context(), PruneOptions{
		Instance:    d.opts.Instance,
		KeepSandbox: func(id string) bool { return id == live.ID },
		KeepImage:   func(ref string) bool { return ref == kept },
	})
	if err != nil {
		t.Fatal(err)
	}
	has := func(objects []Object, kind, name string) bool {
		return slices.ContainsFunc(objects, func(o Object) bool { return o.Kind == kind && (name == "" || o.Name == name) })
	}
	for _, want := range []struct{ kind, id string }{{ObjectSandbox, ended.ContainerID}, {ObjectBuild, build.ID}} {
		if !slices.ContainsFunc(report.Removed, func(o Object) bool { return o.Kind == want.kind && o.ID == want.id }) {
			t.Errorf("the %s %s was not removed: %+v", want.kind, want.id, report.Removed)
		}
	}
	if !has(report.Removed, ObjectImage, dropped) || !has(report.Kept, ObjectImage, kept) {
		t.Errorf("removed %+v, kept %+v: want %s removed and %s kept", report.Removed, report.Kept, dropped, kept)
	}
	if !slices.ContainsFunc(report.Removed, func(o Object) bool { return o.Kind == ObjectLayer && o.Size >= 1<<20 }) {
		t.Errorf("no layer of at least 1 MiB removed: %+v", report.Removed)
	}
	if !slices.ContainsFunc(report.Kept, func(o Object) bool { return o.Kind == ObjectSandbox && o.ID == live.ContainerID }) || !has(report.Kept, ObjectEnvd, "") {
		t.Errorf("kept %+v: want the live sandbox's container and the envd volume it mounts", report.Kept)
	}
	if has(report.Kept, ObjectLayer, "") {
		t.Errorf("layers kept: %+v", report.Kept)
	}

	if _, err := Prune(t.Context(), PruneOptions{Instance: d.opts.Instance}); err != nil {
		t.Fatal(err)
	}
	if left, err := Objects(t.Context(), "", d.opts.Instance); err != nil || len(left) > 0 {
		t.Errorf("left after a prune that keeps nothing: %+v, %v", left, err)
	}
}

// The image of a deleted template that a sandbox still runs from stays
// until that sandbox's container goes, then goes with it.
func TestRemoveImageInUseWaitsForItsContainer(t *testing.T) {
	t.Parallel()
	d := newPruneTestDocker(t)
	ref := buildImage(t, d)
	sb, err := d.StartSandbox(t.Context(), engine.SandboxSpec{SandboxID: randomID("sb"), Image: ref, User: "root", AccessToken: rand.Text()})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.RemoveImage(t.Context(), ref); err != nil {
		t.Fatalf("removing an image in use: %v, want it left to its container", err)
	}
	if _, err := d.cli.ImageInspect(t.Context(), ref); err != nil {
		t.Fatalf("the image in use went: %v", err)
	}
	if err := d.StopSandbox(t.Context(), sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.cli.ImageInspect(context.Background(), ref); !isNotFound(err) {
		t.Errorf("the image outlived its last container: %v", err)
	}
}

// TestDiskUsageSideBySide measures the engine's disk use from several
// callers at once, as servers' prunes and the test suites' clean-ups do:
// the engine refuses all but one meanwhile, and each must still get its
// answer.
func TestDiskUsageSideBySide(t *testing.T) {
	t.Parallel()
	d := newPruneTestDocker(t)
	errs := make(chan error, 6)
	for range cap(errs) {
		go func() {
			_, err := diskUsage(t.Context(), d.cli)
			errs <- err
		}()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
