package templatebuild

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
)

// walkCounter counts the walks of a build context through inotify: every walk opens the
// context's .dockerignore once (buildcontext's listing reads it first), and the kernel
// queues an event for each open as it happens, so reading the queue after an operation
// counts the walks the operation made.
type walkCounter struct {
	fd    int
	walks int
}

func countWalks(t *testing.T, dir string) *walkCounter {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	acctest.Must(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	_, err = unix.InotifyAddWatch(fd, dir, unix.IN_OPEN)
	acctest.Must(t, err)
	return &walkCounter{fd: fd}
}

// count is the number of walks so far.
func (w *walkCounter) count(t *testing.T) int {
	t.Helper()
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(w.fd, buf)
		if errors.Is(err, unix.EAGAIN) {
			return w.walks
		}
		acctest.Must(t, err)
		for b := buf[:n]; len(b) >= unix.SizeofInotifyEvent; {
			nameLen := int(binary.NativeEndian.Uint32(b[12:16]))
			name := string(bytes.TrimRight(b[unix.SizeofInotifyEvent:unix.SizeofInotifyEvent+nameLen], "\x00"))
			if name == ".dockerignore" {
				w.walks++
			}
			b = b[unix.SizeofInotifyEvent+nameLen:]
		}
	}
}

// TestApplyWalksTheContextOnce: a plan walks a COPY source once (the hash), the build an
// apply resolves from the plan's hashes walks none, and the apply's run walks it once,
// spooling the archive it checks against the planned hash; a run whose archive the server
// has walks none. In both hash modes, the e2b-sdk one with the stat cache the plan filled.
func TestApplyWalksTheContextOnce(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // the stat cache, empty
	for _, mode := range []string{HashPortable, HashSDK} {
		t.Run(mode, func(t *testing.T) {
			_, api, reg := newTemplate(t)
			dir := t.TempDir()
			acctest.WriteFiles(t, dir, map[string]string{".dockerignore": "ignored.txt\n", "ignored.txt": "x",
				"app/a.txt": "a " + mode, "app/sub/b.txt": "b"})
			// Older than the stat cache's window for files that may still change.
			old := time.Now().Add(-time.Hour)
			for _, f := range []string{"app/a.txt", "app/sub/b.txt"} {
				acctest.Must(t, os.Chtimes(filepath.Join(dir, f), old, old))
			}
			walks := countWalks(t, dir)
			spec := Spec{TemplateID: reg.TemplateID, FromImage: fakeBaseImage, Context: dir, HashMode: mode,
				Steps: []Step{{Step: steps.NewCopy(steps.CopyArgs{Src: "app", Dest: "/app"})}}}
			ctx := t.Context()

			plan, err := Plan(ctx, spec, &recorder{})
			acctest.Must(t, err)
			planWalks := walks.count(t)
			b, err := Planned(ctx, spec, plan.Hashes(), &recorder{})
			acctest.Must(t, err)
			resolveWalks := walks.count(t) - planWalks
			r := NewRunner(api)
			_, err = r.Run(ctx, b, Options{})
			acctest.Must(t, err)
			runWalks := walks.count(t) - planWalks - resolveWalks
			// Cold, the e2b-sdk plan first tries the cache alone: a walk more.
			wantPlan := map[string]int{HashPortable: 1, HashSDK: 2}[mode]
			if planWalks != wantPlan || resolveWalks != 0 || runWalks != 1 {
				t.Errorf("walks: plan %d, apply's resolve %d, apply's run %d; want %d, 0, 1", planWalks, resolveWalks, runWalks, wantPlan)
			}

			// A second plan finds the digests cached; the apply uploads nothing, so walks nothing.
			before := walks.count(t)
			again, err := Plan(ctx, spec, &recorder{})
			acctest.Must(t, err)
			b, err = Planned(ctx, spec, again.Hashes(), &recorder{})
			acctest.Must(t, err)
			afterPlan := walks.count(t)
			_, err = r.Run(ctx, b, Options{})
			acctest.Must(t, err)
			if p, a := afterPlan-before, walks.count(t)-afterPlan; p != 1 || a != 0 {
				t.Errorf("second plan and apply walked %d and %d times, want 1 and 0", p, a)
			}
		})
	}
}

// TestWalkCounterSeesOpens checks the counter itself: one open of .dockerignore, one walk.
func TestWalkCounterSeesOpens(t *testing.T) {
	dir := t.TempDir()
	acctest.WriteFiles(t, dir, map[string]string{".dockerignore": "x\n"})
	walks := countWalks(t, dir)
	_, err := os.ReadFile(filepath.Join(dir, ".dockerignore"))
	acctest.Must(t, err)
	if n := walks.count(t); n != 1 {
		t.Errorf("%d opens counted, want 1", n)
	}
}
