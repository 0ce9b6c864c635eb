//go:build linux

package localserver

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/api"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

func hashOf(n int) string { return fmt.Sprintf("%064x", n) }

func (ts *testServer) link(templateID, hash string) e2b.TemplateBuildFileUpload {
	ts.t.Helper()
	var out e2b.TemplateBuildFileUpload
	ts.call("GET", "/templates/"+templateID+"/files/"+hash, nil, http.StatusCreated, &out)
	return out
}

// put uploads body as the SDK does: no API key, exact Content-Length.
func put(t *testing.T, url string, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequest("PUT", url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func putOK(t *testing.T, url string, body []byte) {
	t.Helper()
	resp := put(t, url, body)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("upload = %d %s", resp.StatusCode, raw)
	}
}

func (ts *testServer) stats() store.Stats {
	ts.t.Helper()
	var st store.Stats
	ts.call("GET", "/_local/stats", nil, http.StatusOK, &st)
	return st
}

func TestUploadGrantFlow(t *testing.T) {
	clock := newTestClock()
	ts := startServer(t, newFakeEngine(t), serverOptions{configure: func(c *Config) { c.Now = clock.Now }})
	reg := ts.register("app")
	hash := hashOf(1)
	ts.expectError("GET", "/templates/"+reg.TemplateID+"/files/"+strings.ToUpper(hashOf(0xabc)), nil, 400, "Invalid files hash")
	ts.expectError("GET", "/templates/"+reg.TemplateID+"/files/abc", nil, 400, "Invalid files hash")
	ts.expectError("GET", "/templates/aaaaaaaaaaaaaaaaaaaa/files/"+hash, nil, 404, "not found")

	first := ts.link(reg.TemplateID, hash)
	if first.Present || !strings.HasPrefix(first.URL, ts.URL+api.UploadPath) {
		t.Fatalf("link = %+v, want absent and an upload URL on %s", first, ts.URL)
	}
	// A failed upload leaves the grant usable.
	expectError(t, put(t, first.URL, []byte("not a tar at all, just some text that is long enough to not be a header")), 400, "archive")
	archive := testutil.Tarball(t, true, testutil.Dir("app/"), testutil.File("app/a.txt", "A"), testutil.Symlink("app/link", "a.txt"), testutil.Hardlink("app/hard", "app/a.txt"))
	putOK(t, first.URL, archive)
	// A retry of a PUT whose answer was lost succeeds, as with E2B's
	// presigned URLs: the archive of the grant's hash is stored.
	putOK(t, first.URL, archive)
	putOK(t, first.URL, testutil.Tarball(t, false, testutil.File("other.txt", "B")))

	again := ts.link(reg.TemplateID, hash)
	if !again.Present || again.URL == "" || again.URL == first.URL {
		t.Fatalf("second link = %+v, want present with a fresh URL", again)
	}
	// First write wins: a different body for the same hash is accepted and dropped.
	putOK(t, again.URL, testutil.Tarball(t, false, testutil.File("other.txt", "B")))
	path, _, _ := ts.Server.Store().Uploads.ArchivePath(hash)
	stored, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(stored, archive) {
		t.Fatalf("stored archive changed (err %v)", err)
	}
	if st := ts.stats(); st.Uploads != 2 || st.Archives != 1 {
		t.Errorf("stats = %+v, want 2 uploads of 1 archive", st)
	}

	// Grants expire.
	late := ts.link(reg.TemplateID, hashOf(2))
	clock.Advance(ts.Config.UploadURLTTL)
	expectError(t, put(t, late.URL, archive), 403, "expired")
	expectError(t, put(t, ts.URL+api.UploadPath+"made-up", archive), 403, "invalid")
	// Nothing of the refused uploads is left behind.
	spools, _ := os.ReadDir(filepath.Join(ts.Config.DataDir, "uploads"))
	if len(spools) != 0 {
		t.Errorf("spool dir holds %d files after the uploads", len(spools))
	}
}

func TestUploadLimits(t *testing.T) {
	ts := startServer(t, newFakeEngine(t), serverOptions{configure: func(c *Config) {
		c.MaxUploadBytes = 4096
		c.MaxUnpackedBytes = 8192
		c.MaxArchiveEntries = 3
	}})
	reg := ts.register("app")
	big := bytes.Repeat([]byte("x"), 5000)
	u := ts.link(reg.TemplateID, hashOf(1)).URL
	expectError(t, put(t, u, big), 413, "4096 bytes")
	// Chunked (no Content-Length) is cut off while streaming.
	req, _ := http.NewRequest("PUT", u, io.MultiReader(bytes.NewReader(big)))
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	expectError(t, resp, 413, "larger than the limit")
	// A small gzip that unpacks beyond the limit.
	expectError(t, put(t, u, testutil.Tarball(t, true, testutil.File("zeros", strings.Repeat("\x00", 20000)))), 400, "unpacks to more than the limit of 8192 bytes")
	expectError(t, put(t, u, testutil.Tarball(t, true, testutil.File("a", ""), testutil.File("b", ""), testutil.File("c", ""), testutil.File("d", ""))), 400, "more than the limit of 3 entries")
	// The grant survived every refusal.
	putOK(t, u, testutil.Tarball(t, true, testutil.File("a", "ok")))
}

// The checks themselves are buildcontext.CheckArchive's; this is the
// handler's side: a refused archive is a 400 naming the entry, nothing of it
// is stored, and an archive with links that stay inside is accepted.
func TestUploadRejectsEscapingEntries(t *testing.T) {
	ts := startServer(t, newFakeEngine(t))
	reg := ts.register("app")
	for i, gz := range []bool{true, false} {
		u := ts.link(reg.TemplateID, hashOf(i)).URL
		expectError(t, put(t, u, testutil.Tarball(t, gz, testutil.File("ok.txt", "ok"), testutil.File("a/../../x", "x"))), 400, `"a/../../x": name contains ".."`)
		expectError(t, put(t, u, testutil.Tarball(t, gz, testutil.Symlink("d", "sub"), testutil.File("d/x", "write through the link"))), 400, `"d/x": lies below the symlink "d"`)
	}
	u := ts.link(reg.TemplateID, hashOf(100)).URL
	putOK(t, u, testutil.Tarball(t, true, testutil.Dir("a/"), testutil.Dir("a/b/"), testutil.Symlink("a/b/up", "../x"), testutil.File("a/x", "x"), testutil.Hardlink("a/h", "a/x")))
	if st := ts.stats(); st.Archives != 1 {
		t.Errorf("%d archives stored, want only the good one", st.Archives)
	}
}

func TestCopyStepUsesTheStoredArchive(t *testing.T) {
	eng := newFakeEngine(t)
	ts := startServer(t, eng)
	reg := ts.register("app")
	hash := hashOf(7)
	putOK(t, ts.link(reg.TemplateID, hash).URL, testutil.Tarball(t, true, testutil.File("a.txt", "A")))
	ts.start(reg, e2b.TemplateBuildStartV2{FromImage: "img", Steps: []e2b.TemplateStep{
		{Type: "COPY", Args: []string{"a.txt", "/a.txt", "", ""}, FilesHash: hash},
		{Type: "add", Args: []string{"a.txt", "/b.txt", "", ""}, FilesHash: hash},
	}})
	spec := lastBuildSpec(t, eng, reg.BuildID)
	if spec.Steps[1].Type != "COPY" || spec.Archives[hash] == "" {
		t.Fatalf("spec steps %+v archives %v", spec.Steps, spec.Archives)
	}
	if raw, err := os.ReadFile(spec.Archives[hash]); err != nil || !bytes.Equal(raw, testutil.Tarball(t, true, testutil.File("a.txt", "A"))) {
		t.Errorf("archive given to the engine: %v", err)
	}
	if info := ts.waitBuild(reg); info.Status != "ready" {
		t.Fatal(info)
	}
}

// Upload grants do not pile up: a template and hash keep a bounded number,
// and expired ones, spent or not, are pruned (on the next link request and
// at start).
func TestUploadGrantsArePruned(t *testing.T) {
	clock := newTestClock()
	dataDir := t.TempDir()
	configure := func(c *Config) { c.Now = clock.Now }
	ts := startServer(t, newFakeEngine(t), serverOptions{configure: configure, dataDir: dataDir, skipCleanup: true})
	reg := ts.register("app")
	var last e2b.TemplateBuildFileUpload
	for range 300 {
		last = ts.link(reg.TemplateID, hashOf(1))
	}
	if st := ts.stats(); st.Grants > store.MaxGrantsPerArchive {
		t.Errorf("%d grants kept after 300 link requests for one archive, want at most %d", st.Grants, store.MaxGrantsPerArchive)
	}
	putOK(t, last.URL, testutil.Tarball(t, true, testutil.File("a", "A")))
	for i := range 20 {
		ts.link(reg.TemplateID, hashOf(100+i))
	}
	clock.Advance(ts.Config.UploadURLTTL)
	ts.link(reg.TemplateID, hashOf(2))
	if st := ts.stats(); st.Grants != 1 {
		t.Errorf("%d grants kept once all but one expired, want 1", st.Grants)
	}
	// At start, too.
	clock.Advance(ts.Config.UploadURLTTL)
	if err := ts.Server.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	ts = startServer(t, newFakeEngine(t), serverOptions{configure: configure, dataDir: dataDir})
	if st := ts.stats(); st.Grants != 0 {
		t.Errorf("%d grants kept at start after all expired, want 0", st.Grants)
	}
}

// A full disk on the server is the server's failure (507), not the
// client's, and leaves nothing in the spool.
func TestUploadDiskFullIsAServerError(t *testing.T) {
	dataDir := t.TempDir()
	spool := filepath.Join(dataDir, "uploads")
	// A disk with 64 KiB free: writes beyond that fail as write(2) fails on a
	// full filesystem. Simulated, since mounting a small filesystem needs
	// privileges a CI container often lacks.
	const free = 64 << 10
	var written atomic.Int64
	fullDisk := func(f *os.File, p []byte) (int, error) {
		room := max(free-written.Load(), 0)
		n, err := f.Write(p[:min(int64(len(p)), room)])
		written.Add(int64(n))
		if err == nil && n < len(p) {
			err = &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
		}
		return n, err
	}
	ts := startServer(t, newFakeEngine(t), serverOptions{dataDir: dataDir, configure: func(c *Config) { c.writeSpool = fullDisk }})
	reg := ts.register("app")
	u := ts.link(reg.TemplateID, hashOf(1)).URL
	expectError(t, put(t, u, bytes.Repeat([]byte("x"), 256<<10)), http.StatusInsufficientStorage, "no space left")
	if written.Load() != free {
		t.Errorf("%d bytes reached the spool file, want the %d that fit: the write path was not the server's", written.Load(), free)
	}
	if spools, _ := os.ReadDir(spool); len(spools) != 0 {
		t.Errorf("spool dir holds %d files after the failed upload", len(spools))
	}
}

// A tar cut short at a block boundary, plain or gzip'd, lacks the
// end-of-archive marker and is refused.
func TestUploadRequiresTheEndOfArchiveMarker(t *testing.T) {
	ts := startServer(t, newFakeEngine(t))
	reg := ts.register("app")
	plain := testutil.Tarball(t, false, testutil.File("a.txt", "A"), testutil.File("b.txt", strings.Repeat("\x00", 2048)))
	cut := plain[:512+512+512+2048] // both entries, no end marker
	u := ts.link(reg.TemplateID, hashOf(1)).URL
	expectError(t, put(t, u, cut), 400, "end-of-archive marker")
	expectError(t, put(t, u, plain[:len(cut)+512]), 400, "end-of-archive marker") // one zero block
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(cut); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	expectError(t, put(t, u, gz.Bytes()), 400, "end-of-archive marker")
	putOK(t, u, plain)
}
