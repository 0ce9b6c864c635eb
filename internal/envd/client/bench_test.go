//go:build linux

package client

import (
	"testing"
)

// BenchmarkRun measures one short command end to end: Start, the events,
// the end, over loopback HTTP against the real envd server.
func BenchmarkRun(b *testing.B) {
	c := startEnvd(b, nil).client(b, "")
	for b.Loop() {
		if _, err := c.Run(b.Context(), RunRequest{Cmd: "true"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpload measures streaming upload throughput (8 MiB per op).
func BenchmarkUpload(b *testing.B) {
	c := startEnvd(b, nil).client(b, "")
	const size = 8 << 20
	path := b.TempDir() + "/f"
	b.SetBytes(size)
	for b.Loop() {
		if err := c.Upload(b.Context(), path, "", generator(2, size)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunOutput measures output streaming throughput (8 MiB of stdout
// per op, all kept).
func BenchmarkRunOutput(b *testing.B) {
	c := startEnvd(b, nil).client(b, "")
	b.SetBytes(8 << 20)
	for b.Loop() {
		res, err := c.Run(b.Context(), RunRequest{Cmd: "head", Args: []string{"-c", "8388608", "/dev/zero"}, MaxOutputBytes: 8 << 20})
		if err != nil || len(res.Stdout) != 8<<20 {
			b.Fatal(err)
		}
	}
}
