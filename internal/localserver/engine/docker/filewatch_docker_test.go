package docker

import (
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
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
