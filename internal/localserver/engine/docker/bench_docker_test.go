package docker

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
)

// BenchmarkBuildLayerCache builds `COPY . /bench` of the tree in
// $E2B_BENCH_TREE (scripts/bench-build.sh generates the 440.8 MB benchmark
// tree of design/performance.md) and a RUN, then rebuilds with only the RUN
// changed. It reports the COPY phase's throughput (its container, the copy
// and the commit of its layer, from the log's timestamps), the final save,
// both builds' times and their ratio.
func BenchmarkBuildLayerCache(b *testing.B) {
	tree := os.Getenv("E2B_BENCH_TREE")
	if tree == "" {
		b.Skip("E2B_BENCH_TREE is not set (scripts/bench-build.sh sets it)")
	}
	archive, size := spoolContext(b, tree, ".")
	for b.Loop() {
		d := newTestDocker(b, "")
		build := func(run string) (time.Duration, *buildLog) {
			log := &buildLog{}
			start := time.Now()
			res, err := d.Build(b.Context(), engine.BuildSpec{
				TemplateID: randomID("tpl"), BuildID: randomID("build"), BaseImage: dockerEnv.baseImage,
				Steps: []e2b.TemplateStep{
					{Type: "COPY", Args: []string{".", "/bench/", "", ""}, FilesHash: "tree"},
					{Type: "RUN", Args: []string{run}},
				},
				Archives: map[string]string{"tree": archive},
				Log:      log.add,
			})
			if err != nil {
				b.Fatalf("build: %v\n%s", err, log)
			}
			took := time.Since(start)
			if err := d.RemoveImage(b.Context(), res.Image); err != nil {
				b.Fatal(err)
			}
			return took, log
		}
		first, log := build("echo one")
		copyPhase := log.between("[builder 1/2]", "[builder 2/2]")
		save := log.between("Saving the image", "Build finished")
		again, _ := build("echo two")
		b.ReportMetric(float64(size)/1e6/copyPhase.Seconds(), "copy_MB/s")
		b.ReportMetric(copyPhase.Seconds(), "copy_s")
		b.ReportMetric(save.Seconds(), "save_s")
		b.ReportMetric(first.Seconds(), "first_s")
		b.ReportMetric(again.Seconds(), "rebuild_s")
		b.ReportMetric(again.Seconds()/first.Seconds(), "rebuild/first")
	}
}

// between is the time from the first line containing from to the first
// later line containing to.
func (l *buildLog) between(from, to string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var start time.Time
	for _, e := range l.entries {
		switch {
		case start.IsZero() && strings.Contains(e.Message, from):
			start = e.Timestamp
		case !start.IsZero() && strings.Contains(e.Message, to):
			return e.Timestamp.Sub(start)
		}
	}
	return 0
}
