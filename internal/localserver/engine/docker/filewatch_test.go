package docker

import (
	"testing"
	"time"
)

// A container is measured again before it could reach a limit at the
// rates the watch assumes, never sooner than a second apart, and at most
// maxMeasureGap apart far from its limits.
func TestNextMeasure(t *testing.T) {
	const gib = int64(1 << 30)
	for name, c := range map[string]struct {
		lim          containerLimits
		m            measured
		bytesWatched bool
		want         time.Duration
	}{
		"far from both limits":           {containerLimits{bytes: 100 * gib, files: 10_000_000}, measured{files: 9_000, used: gib}, true, maxMeasureGap},
		"the default limits, just begun": {containerLimits{bytes: 10 * gib, files: 655_360}, measured{files: 9_000, used: 0}, true, 10 * time.Second},
		"the file limit is near":         {containerLimits{bytes: 100 * gib, files: 655_360}, measured{files: 555_360}, true, 5 * time.Second},
		"past the file limit's reach":    {containerLimits{files: 20_000}, measured{files: 19_999}, false, minMeasureGap},
		"a small disk limit":             {containerLimits{bytes: 64 << 20, files: 655_360}, measured{files: 10}, true, minMeasureGap},
		"the disk limit is hard":         {containerLimits{bytes: 64 << 20, files: 655_360}, measured{files: 9_000}, false, maxMeasureGap},
		"a new container":                {containerLimits{bytes: 10 * gib, files: 655_360}, measured{}, true, 10 * time.Second},
		"no file limit":                  {containerLimits{bytes: 20 * gib}, measured{used: 10 * gib}, true, 10 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			if got := nextMeasure(c.lim, c.m, c.bytesWatched); got != c.want {
				t.Errorf("nextMeasure(%+v, %+v, %v) = %v, want %v", c.lim, c.m, c.bytesWatched, got, c.want)
			}
		})
	}
}
