//go:build linux

package localserver

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	envdclient "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

// TestRuntimeFigures prints what the runtime of E2B_TEST_RUNTIME costs
// through the local server on the real engine, as p50 and p95 of
// E2B_BENCH_RUNTIME rounds: a sandbox create (until envd answers), a
// create and its first command, a RUN step of 2,000 /bin/true and a COPY
// of 64 MiB (each step's time from the build log). It asserts nothing of
// the times; scripts/bench-runtime.sh runs it under runc and gVisor.
func TestRuntimeFigures(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("E2B_BENCH_RUNTIME"))
	if rounds <= 0 {
		t.Skip("E2B_BENCH_RUNTIME (rounds) is not set: scripts/bench-runtime.sh sets it")
	}
	eng, baseImage := dockerEngine(t)
	rt := runtimeOf(t, eng)
	ts := startServer(t, eng)
	if _, info := ts.buildFrom(baseImage, "bench-runtime"); info.Status != e2b.BuildReady {
		t.Fatalf("build = %+v", info)
	}
	ts.deleteTemplateAtEnd("bench-runtime")

	var create, first, runMany, copyLarge []time.Duration
	for range rounds {
		start := time.Now()
		sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "bench-runtime"})
		create = append(create, time.Since(start))
		c, err := envdclient.New(envdclient.Config{BaseURL: ts.URL, SandboxID: sb.SandboxID, AccessToken: sb.EnvdAccessToken})
		if err != nil {
			t.Fatal(err)
		}
		if res, err := c.Run(t.Context(), envdclient.RunRequest{Cmd: "/bin/true"}); err != nil || res.ExitCode != 0 {
			t.Fatalf("first command: %+v %v", res, err)
		}
		first = append(first, time.Since(start))
		ts.call("DELETE", "/sandboxes/"+sb.SandboxID, nil, http.StatusNoContent, nil)
	}
	for i := range rounds {
		// A step of its own each round, so that no layer is reused.
		script := fmt.Sprintf("i=0; while [ $i -lt 2000 ]; do /bin/true; i=$((i+1)); done; echo round %d", i)
		reg, info := ts.buildFrom(baseImage, "bench-run", run(script))
		if info.Status != e2b.BuildReady {
			t.Fatalf("RUN build = %+v", info)
		}
		runMany = append(runMany, ts.stepTime(reg, "[builder 1/1]", "Saving the image"))
	}
	for i := range rounds {
		reg := ts.register("bench-copy")
		hash := hashOf(0xc0de00 + i)
		blob := make([]byte, 64<<20)
		_, _ = rand.Read(blob)
		putOK(t, ts.link(reg.TemplateID, hash).URL, testutil.Tarball(t, true, testutil.File("blob", string(blob))))
		ts.start(reg, e2b.TemplateBuildStartV2{FromImage: baseImage, Steps: []e2b.TemplateStep{{Type: "COPY", Args: []string{"blob", "/opt/blob", "", ""}, FilesHash: hash}}})
		if info := ts.waitBuild(reg); info.Status != e2b.BuildReady {
			t.Fatalf("COPY build = %+v", info)
		}
		copyLarge = append(copyLarge, ts.stepTime(reg, "[builder 1/1]", "Saving the image"))
	}
	ts.call("DELETE", "/templates/bench-run", nil, http.StatusNoContent, nil)
	ts.call("DELETE", "/templates/bench-copy", nil, http.StatusNoContent, nil)
	for _, m := range []struct {
		name string
		took []time.Duration
	}{
		{"sandbox create", create},
		{"create + first command", first},
		{"RUN 2,000 /bin/true", runMany},
		{"COPY 64 MiB", copyLarge},
	} {
		fmt.Printf("figure runtime=%s gvisor=%v rounds=%d %-24s p50 %7.2fs  p95 %7.2fs\n", rt.Name, rt.GVisor, rounds, m.name, percentile(m.took, 50).Seconds(), percentile(m.took, 95).Seconds())
	}
}

// stepTime is the time from the build log's first entry containing from to
// the first later one containing to.
func (ts *testServer) stepTime(reg e2b.TemplateRequestResponseV3, from, to string) time.Duration {
	ts.t.Helper()
	var start time.Time
	for _, e := range ts.status(reg.TemplateID, reg.BuildID, "").LogEntries {
		switch {
		case start.IsZero() && strings.Contains(e.Message, from):
			start = e.Timestamp
		case !start.IsZero() && strings.Contains(e.Message, to):
			return e.Timestamp.Sub(start)
		}
	}
	ts.t.Fatalf("build %s has no log entries from %q to %q", reg.BuildID, from, to)
	return 0
}

// percentile is the nearest-rank p-th percentile of took.
func percentile(took []time.Duration, p int) time.Duration {
	sorted := slices.Sorted(slices.Values(took))
	rank := (p*len(sorted) + 99) / 100
	return sorted[max(rank, 1)-1]
}
