//go:build linux

package localserver

import (
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	dockerclient "github.com/docker/docker/client"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// A destroy and a stop leave on the engine nothing of the server that no
// record owns: the image of a template deleted while a build from it ran
// goes when that build's container does, and no container or envd volume
// stays. What is left is the layer cache, which `server prune` removes (it
// refuses while the server runs). The engine is the one other tests
// share: only the objects carrying this server's instance label count.
func TestDockerStopThenPruneLeavesNothing(t *testing.T) {
	baseImage, binary, dataDir, cmd, ts := startCommandServer(t)
	instance := InstanceOf(dataDir)
	cli, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	reg, info := ts.buildFrom(baseImage, "prunable", run("echo cached > /tmp/layer"))
	if info.Status != "ready" {
		t.Fatalf("build = %+v", info)
	}
	templateImage := "e2b-local/" + reg.TemplateID + ":" + reg.BuildID
	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "prunable"})
	volumes := envdVolumes(t, cli, instance)
	if len(volumes) == 0 {
		t.Fatal("the running server has no envd volume")
	}

	prune := func(args ...string) (string, error) {
		out, err := exec.Command(binary, append([]string{"server", "prune", "--data-dir", dataDir}, args...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := prune(); err == nil || !strings.Contains(out, "is running (PID") {
		t.Errorf("prune while the server runs: %v\n%s\nwant it refused, naming the server", err, out)
	}
	if out, err := prune("--list"); err != nil || !strings.Contains(out, templateImage) || !strings.Contains(out, "layer image") {
		t.Errorf("prune --list while the server runs: %v\n%s\nwant the template's image and the layer cache", err, out)
	}
	ts.call("DELETE", "/sandboxes/"+sb.SandboxID, nil, http.StatusNoContent, nil)

	// A build from the template holds its image while the template goes.
	from := ts.register("prunable-child")
	ts.start(from, e2b.TemplateBuildStartV2{FromTemplate: "prunable", Steps: []e2b.TemplateStep{run("sleep 600")}})
	for {
		st := ts.status(from.TemplateID, from.BuildID, "")
		if st.Status != "building" {
			t.Fatalf("the build from the template = %+v, want it running", st)
		}
		if slices.ContainsFunc(st.LogEntries, func(e e2b.BuildLogEntry) bool { return strings.Contains(e.Message, "RUN sleep 600") }) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	ts.call("DELETE", "/templates/prunable", nil, http.StatusNoContent, nil)
	if _, err := cli.ImageInspect(t.Context(), templateImage); err != nil {
		t.Fatalf("the image a build runs from went with its template: %v", err)
	}

	// The stop cancels that build.
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("server exit: %v", err)
	}
	left := instanceObjects(t, cli, instance, volumes)
	layers := 0
	for _, o := range left {
		if strings.HasPrefix(o, "image e2b-local-layer:") {
			layers++
		} else {
			t.Errorf("left on the engine after destroy and stop, owned by no record: %s", o)
		}
	}
	if layers == 0 {
		t.Errorf("no layer cache kept after the stop (%v): the prune below would prove nothing", left)
	}

	out, err := prune()
	t.Logf("server prune:\n%s", out)
	if err != nil || !strings.Contains(out, "removed  layer image") || !strings.Contains(out, "freed") {
		t.Errorf("prune: %v\n%s\nwant the layers removed and the space freed", err, out)
	}
	if left := instanceObjects(t, cli, instance, volumes); len(left) > 0 {
		t.Errorf("left after server prune: %v", left)
	}
}

// envdVolumes are the names of the envd volumes of the server instance.
func envdVolumes(t *testing.T, cli *dockerclient.Client, instance string) []string {
	t.Helper()
	holders, err := cli.ContainerList(t.Context(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "e2b-local.envd-of="+instance))})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range holders {
		for _, m := range h.Mounts {
			names = append(names, m.Name)
		}
	}
	return names
}

// instanceObjects describes every container and image on the engine that
// carries the instance's labels, and those of volumes that still exist.
func instanceObjects(t *testing.T, cli *dockerclient.Client, instance string, volumes []string) []string {
	t.Helper()
	var out []string
	for _, label := range []string{"e2b-local.instance=" + instance, "e2b-local.envd-of=" + instance} {
		list, err := cli.ContainerList(t.Context(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", label))})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range list {
			out = append(out, "container "+c.ID[:12]+" "+c.State+" "+c.Labels["e2b-local.kind"])
		}
	}
	images, err := cli.ImageList(t.Context(), image.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "e2b-local.instance="+instance))})
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range images {
		name := img.ID
		if len(img.RepoTags) > 0 {
			name = img.RepoTags[0]
		}
		out = append(out, "image "+name)
	}
	for _, v := range volumes {
		if _, err := cli.VolumeInspect(t.Context(), v); err == nil {
			out = append(out, "volume "+v)
		} else if !cerrdefs.IsNotFound(err) {
			t.Fatalf("inspect volume %s: %v", v, err)
		}
	}
	return out
}

// With --prune-on-exit a stop takes the layer cache too: after a destroy
// nothing of the server stays on the engine.
func TestDockerPruneOnExit(t *testing.T) {
	_, baseImage := dockerEngine(t)
	binary, dataDir := buildEnvdBinary(t), t.TempDir()
	cmd, info, stderr := startCommandLog(t, binary, dataDir, "--prune-on-exit")
	ts := &testServer{t: t, URL: info.APIURL, client: http.DefaultClient, apiKey: info.APIKey}
	cli, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, info := ts.buildFrom(baseImage, "pruned-on-exit", run("echo cached > /tmp/layer")); info.Status != "ready" {
		t.Fatalf("build = %+v", info)
	}
	volumes := envdVolumes(t, cli, InstanceOf(dataDir))
	ts.call("DELETE", "/templates/pruned-on-exit", nil, http.StatusNoContent, nil)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("server exit: %v; stderr:\n%s", err, stderr.String())
	}
	if left := instanceObjects(t, cli, InstanceOf(dataDir), volumes); len(left) > 0 {
		t.Errorf("left after a stop with --prune-on-exit: %v; stderr:\n%s", left, stderr.String())
	}
}
