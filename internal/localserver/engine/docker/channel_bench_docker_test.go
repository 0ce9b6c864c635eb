package docker

import (
	"bytes"
	"context"
	"crypto/rand"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
)

// BenchmarkSandboxStart starts a sandbox of the base image until envd
// answers (and removes it, untimed): what a sandbox start costs the
// engine and the channel. With DOCKER_HOST and E2B_TEST_BASE_IMAGE:
//
//	go test -run '^$' -bench 'SandboxStart|Upload' ./internal/localserver/engine/
func BenchmarkSandboxStart(b *testing.B) {
	d := newTestDocker(b, "")
	for range b.N {
		sb, err := d.StartSandbox(b.Context(), engine.SandboxSpec{SandboxID: randomID("bench"), Image: dockerEnv.baseImage, User: "root", AccessToken: rand.Text()})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := d.StopSandbox(context.Background(), sb.ID); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkUpload uploads 64 MiB through envd into a sandbox: the
// throughput of the way the server reaches envd.
func BenchmarkUpload(b *testing.B) {
	d := newTestDocker(b, "")
	token := rand.Text()
	sb, err := d.StartSandbox(b.Context(), engine.SandboxSpec{SandboxID: randomID("bench"), Image: dockerEnv.baseImage, User: "root", AccessToken: token})
	if err != nil {
		b.Fatal(err)
	}
	defer d.StopSandbox(context.Background(), sb.ID) //nolint:errcheck // cleanup of a benchmark
	c := sandboxClient(d, sb, token)
	data := make([]byte, 64<<20)
	_, _ = rand.Read(data)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		if err := c.Upload(b.Context(), "/tmp/blob", "root", bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}
