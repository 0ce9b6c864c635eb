package localserver

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

type entry struct {
	name, body, link string
	typ              byte
}

func file(name, body string) entry       { return entry{name: name, body: body, typ: tar.TypeReg} }
func dir(name string) entry              { return entry{name: name, typ: tar.TypeDir} }
func symlink(name, target string) entry  { return entry{name: name, link: target, typ: tar.TypeSymlink} }
func hardlink(name, target string) entry { return entry{name: name, link: target, typ: tar.TypeLink} }

func tarball(t *testing.T, gz bool, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.Writer = &buf
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		w = zw
	}
	tw := tar.NewWriter(w)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: 0o644, Size: int64(len(e.body))}
		if e.typ == tar.TypeDir {
			hdr.Mode = 0o755
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		zw.Close()
	}
	return buf.Bytes()
}

func hashOf(n int) string { return fmt.Sprintf("%064x", n) }

func (ts *testServer) link(templateID, hash string) e2bapi.TemplateBuildFileUpload {
	ts.t.Helper()
	var out e2bapi.TemplateBuildFileUpload
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
	if first.Present || !strings.HasPrefix(first.URL, ts.URL+uploadPath) {
		t.Fatalf("link = %+v, want absent and an upload URL on %s", first, ts.URL)
	}
	// A failed upload leaves the grant usable.
	expectError(t, put(t, first.URL, []byte("not a tar at all, just some text that is long enough to not be a header")), 400, "archive")
	archive := tarball(t, true, dir("app/"), file("app/a.txt", "A"), symlink("app/link", "a.txt"), hardlink("app/hard", "app/a.txt"))
	putOK(t, first.URL, archive)
	// The grant is single use.
	expectError(t, put(t, first.URL, archive), 403, "already used")

	again := ts.link(reg.TemplateID, hash)
	if !again.Present || again.URL == "" || again.URL == first.URL {
		t.Fatalf("second link = %+v, want present with a fresh URL", again)
	}
	// First write wins: a different body for the same hash is accepted and dropped.
	putOK(t, again.URL, tarball(t, false, file("other.txt", "B")))
	path, _, _ := ts.Server.Store().ArchivePath(hash)
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
	expectError(t, put(t, ts.URL+uploadPath+"made-up", archive), 403, "invalid")
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
	expectError(t, put(t, u, tarball(t, true, file("zeros", strings.Repeat("\x00", 20000)))), 400, "unpacks to more than the limit of 8192 bytes")
	expectError(t, put(t, u, tarball(t, true, file("a", ""), file("b", ""), file("c", ""), file("d", ""))), 400, "more than the limit of 3 entries")
	// The grant survived every refusal.
	putOK(t, u, tarball(t, true, file("a", "ok")))
}

func TestUploadRejectsEscapingEntries(t *testing.T) {
	ts := startServer(t, newFakeEngine(t))
	reg := ts.register("app")
	cases := []struct {
		entries []entry
		want    string
	}{
		{[]entry{file("/etc/passwd", "x")}, `"/etc/passwd": absolute name`},
		{[]entry{file("a/../../x", "x")}, `"a/../../x": name contains ".."`},
		{[]entry{symlink("l", "../outside")}, `"l": symlink to "../outside" leaves the archive`},
		{[]entry{symlink("d/l", "../../x")}, `"d/l": symlink to "../../x"`},
		{[]entry{symlink("abs", "/etc")}, `"abs": symlink to the absolute path "/etc"`},
		{[]entry{hardlink("h", "../x")}, `"h": hard link to "../x"`},
		{[]entry{hardlink("h", "/etc/shadow")}, `"h": hard link to "/etc/shadow"`},
		{[]entry{symlink("d", "sub"), file("d/x", "write through the link")}, `"d/x": lies below the symlink "d"`},
		{[]entry{{name: "dev", typ: tar.TypeChar}}, `"dev": unsupported entry type`},
	}
	for i, c := range cases {
		for _, gz := range []bool{true, false} {
			u := ts.link(reg.TemplateID, hashOf(i)).URL
			expectError(t, put(t, u, tarball(t, gz, c.entries...)), 400, c.want)
		}
	}
	// Links that stay inside are fine.
	u := ts.link(reg.TemplateID, hashOf(100)).URL
	putOK(t, u, tarball(t, true, dir("a/"), dir("a/b/"), symlink("a/b/up", "../x"), file("a/x", "x"), hardlink("a/h", "a/x")))
	if st := ts.stats(); st.Archives != 1 {
		t.Errorf("%d archives stored, want only the good one", st.Archives)
	}
}

func TestCopyStepUsesTheStoredArchive(t *testing.T) {
	eng := newFakeEngine(t)
	ts := startServer(t, eng)
	reg := ts.register("app")
	hash := hashOf(7)
	putOK(t, ts.link(reg.TemplateID, hash).URL, tarball(t, true, file("a.txt", "A")))
	ts.start(reg, e2bapi.TemplateBuildStartV2{FromImage: "img", Steps: []e2bapi.TemplateStep{
		{Type: "COPY", Args: []string{"a.txt", "/a.txt", "", ""}, FilesHash: hash},
		{Type: "add", Args: []string{"a.txt", "/b.txt", "", ""}, FilesHash: hash},
	}})
	spec := lastBuildSpec(t, eng, reg.BuildID)
	if spec.Steps[1].Type != "COPY" || spec.Archives[hash] == "" {
		t.Fatalf("spec steps %+v archives %v", spec.Steps, spec.Archives)
	}
	if raw, err := os.ReadFile(spec.Archives[hash]); err != nil || !bytes.Equal(raw, tarball(t, true, file("a.txt", "A"))) {
		t.Errorf("archive given to the engine: %v", err)
	}
	if info := ts.waitBuild(reg); info.Status != "ready" {
		t.Fatal(info)
	}
}
