package docker

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
)

// The engine's changes of a container are counted as they come: every
// file and directory the container added, and the directories it changed
// on the way.
func TestCountChanges(t *testing.T) {
	d := newTestDockerWith(t, func(*DockerOptions) {})
	created, err := d.cli.ContainerCreate(t.Context(), &container.Config{
		Image: dockerEnv.baseImage, Entrypoint: []string{"/bin/sh", "-c", "mkdir /made && cd /made && i=0 && while [ $i -lt 100 ]; do : >f$i; i=$((i+1)); done && sleep 600"},
		Labels: d.labels.of(kindSelfTest, "", "", ""),
	}, hostConfig("none", "", d.seccompOpt, false), nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	removeContainerAtEnd(t, d, created.ID)
	if n, err := d.watch.countChanges(t.Context(), created.ID); err != nil || n != 0 {
		t.Fatalf("changes of a container not started = %d, %v; want 0", n, err)
	}
	if err := d.cli.ContainerStart(t.Context(), created.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	for want := int64(101); ; time.Sleep(100 * time.Millisecond) {
		n, err := d.watch.countChanges(t.Context(), created.ID)
		if err != nil {
			t.Fatal(err)
		}
		if n == want {
			break
		}
		if n > want {
			t.Fatalf("changes = %d, want %d (/made and its 100 files)", n, want)
		}
	}
}

// A pooled container runs only envd until it is handed out, so the watch
// leaves it alone until then (measuring idle pooled containers every few
// seconds took most of the engine's time); handed out, it is measured and
// stopped past its file limit.
func TestFileWatchSkipsWarmContainers(t *testing.T) {
	t.Parallel()
	const limit = 5
	d := newTestDockerWith(t, func(o *DockerOptions) { o.Network, o.InodesPerSandbox = "none", limit })
	spec := engine.SandboxSpec{SandboxID: randomID("warm"), Image: dockerEnv.baseImage, User: "root", AccessToken: rand.Text()}
	sb, err := d.WarmSandbox(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.StopSandbox(context.Background(), spec.SandboxID) })
	// Files past the limit, made from outside: nothing in a warm container
	// would make them.
	exec, err := d.cli.ContainerExecCreate(t.Context(), sb.ContainerID, container.ExecOptions{Cmd: []string{"/bin/sh", "-c", "mkdir /made && cd /made && for i in 1 2 3 4 5 6 7 8 9 10; do : >f$i; done"}})
	if err == nil {
		err = d.cli.ContainerExecStart(t.Context(), exec.ID, container.ExecStartOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	for n := int64(0); n <= limit; time.Sleep(100 * time.Millisecond) {
		if n, err = d.watch.countChanges(t.Context(), sb.ContainerID); err != nil {
			t.Fatal(err)
		}
	}
	// Passes over several times the longest wait a container this close to
	// its limit gets.
	for range 6 {
		stopped, err := d.EnforceDiskLimits(t.Context())
		if err != nil || len(stopped) != 0 {
			t.Fatalf("a warm container was stopped: %+v, %v", stopped, err)
		}
		time.Sleep(minMeasureGap / 2)
	}
	if err := d.InitSandbox(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		stopped, err := d.EnforceDiskLimits(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(stopped) == 1 && stopped[0].SandboxID == spec.SandboxID && stopped[0].FileLimit == limit {
			return
		}
		if len(stopped) != 0 || time.Now().After(deadline) {
			t.Fatalf("after its hand-out the container past its file limit was stopped: %+v, want it alone, within a minute", stopped)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
