//go:build linux

package server

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/filesystem"
)

func TestFilesystem(t *testing.T) {
	e := startEnvd(t, Config{})
	fsc := e.filesystem()
	ctx := t.Context()
	dir := t.TempDir()

	t.Run("MakeDir and Stat", func(t *testing.T) {
		path := filepath.Join(dir, "made", "deep")
		before := time.Now().Add(-time.Second)
		resp, err := fsc.MakeDir(ctx, connect.NewRequest(&pb.MakeDirRequest{Path: path}))
		if err != nil {
			t.Fatalf("MakeDir: %v", err)
		}
		entry := resp.Msg.GetEntry()
		if entry.GetName() != "deep" || entry.GetPath() != path || entry.GetType() != pb.FileType_FILE_TYPE_DIRECTORY ||
			entry.GetMode() != 0o755 || entry.GetPermissions() != "drwxr-xr-x" || entry.GetOwner() != "root" || entry.GetGroup() != "root" ||
			entry.GetModifiedTime().AsTime().Before(before) {
			t.Errorf("MakeDir entry %v", entry)
		}
		_, err = fsc.MakeDir(ctx, connect.NewRequest(&pb.MakeDirRequest{Path: path}))
		if connect.CodeOf(err) != connect.CodeAlreadyExists {
			t.Errorf("second MakeDir: %v, want already_exists", err)
		}
	})
	t.Run("Stat file", func(t *testing.T) {
		file := filepath.Join(dir, "file.txt")
		if err := os.WriteFile(file, []byte("12345"), 0o640); err != nil {
			t.Fatal(err)
		}
		resp, err := fsc.Stat(ctx, connect.NewRequest(&pb.StatRequest{Path: file}))
		if err != nil {
			t.Fatalf("Stat: %v", err)
		}
		if e := resp.Msg.GetEntry(); e.GetType() != pb.FileType_FILE_TYPE_FILE || e.GetSize() != 5 || e.GetMode() != 0o640 || e.GetPermissions() != "-rw-r-----" || e.SymlinkTarget != nil {
			t.Errorf("Stat file %v", e)
		}
		_, err = fsc.Stat(ctx, connect.NewRequest(&pb.StatRequest{Path: filepath.Join(dir, "missing")}))
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("Stat missing: %v", err)
		}
	})
	t.Run("ListDir depth", func(t *testing.T) {
		root := filepath.Join(dir, "tree")
		for _, p := range []string{"a/b/c", "x"} {
			if err := os.MkdirAll(filepath.Join(root, p), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(root, "a", "f"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		names := func(depth uint32) []string {
			resp, err := fsc.ListDir(ctx, connect.NewRequest(&pb.ListDirRequest{Path: root, Depth: depth}))
			if err != nil {
				t.Fatalf("ListDir(depth %d): %v", depth, err)
			}
			var out []string
			for _, e := range resp.Msg.GetEntries() {
				rel, _ := filepath.Rel(root, e.GetPath())
				out = append(out, rel)
			}
			slices.Sort(out)
			return out
		}
		if got := names(0); !slices.Equal(got, []string{"a", "x"}) {
			t.Errorf("depth 0 (means 1): %v", got)
		}
		if got := names(2); !slices.Equal(got, []string{"a", "a/b", "a/f", "x"}) {
			t.Errorf("depth 2: %v", got)
		}
		_, err := fsc.ListDir(ctx, connect.NewRequest(&pb.ListDirRequest{Path: filepath.Join(root, "nope")}))
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("ListDir missing: %v", err)
		}
	})
	t.Run("Move and Remove", func(t *testing.T) {
		src := filepath.Join(dir, "src.txt")
		if err := os.WriteFile(src, []byte("m"), 0o644); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, "moved", "dst.txt")
		resp, err := fsc.Move(ctx, connect.NewRequest(&pb.MoveRequest{Source: src, Destination: dst}))
		if err != nil {
			t.Fatalf("Move: %v", err)
		}
		if resp.Msg.GetEntry().GetPath() != dst {
			t.Errorf("Move entry %v", resp.Msg.GetEntry())
		}
		if _, err := os.Stat(src); !os.IsNotExist(err) {
			t.Errorf("source still there: %v", err)
		}
		_, err = fsc.Move(ctx, connect.NewRequest(&pb.MoveRequest{Source: src, Destination: dst}))
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("Move missing: %v", err)
		}
		if _, err := fsc.Remove(ctx, connect.NewRequest(&pb.RemoveRequest{Path: filepath.Join(dir, "moved")})); err != nil {
			t.Fatalf("Remove: %v", err)
		}
		if _, err := os.Stat(dst); !os.IsNotExist(err) {
			t.Errorf("removed tree still there: %v", err)
		}
	})
	t.Run("Remove failure is internal", func(t *testing.T) {
		// Even root may not unlink procfs entries.
		_, err := fsc.Remove(ctx, connect.NewRequest(&pb.RemoveRequest{Path: "/proc/1/status"}))
		if connect.CodeOf(err) != connect.CodeInternal || !strings.Contains(err.Error(), "error removing file or directory") {
			t.Errorf("Remove /proc/1/status: %v, want internal", err)
		}
	})
}

func TestFilesystemAsUser(t *testing.T) {
	u := testUser(t)
	e := startEnvd(t, Config{})
	fsc := e.filesystem()
	name := "made-" + time.Now().Format("150405.000000000")
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Join(u.home, name)) })
	req := connect.NewRequest(&pb.MakeDirRequest{Path: name + "/inner"})
	req.Header().Set("Authorization", basicUser(u.name))
	resp, err := fsc.MakeDir(t.Context(), req)
	if err != nil {
		t.Fatalf("MakeDir: %v", err)
	}
	entry := resp.Msg.GetEntry()
	if entry.GetPath() != filepath.Join(u.home, name, "inner") || entry.GetOwner() != u.name {
		t.Errorf("relative MakeDir as %s: %v", u.name, entry)
	}
	outer, err := entryInfo(filepath.Join(u.home, name))
	if err != nil || outer.GetOwner() != u.name {
		t.Errorf("created parent %v (%v), want owned by %s", outer, err, u.name)
	}
	req2 := connect.NewRequest(&pb.StatRequest{Path: "~/" + name})
	req2.Header().Set("Authorization", basicUser("nosuchuser"))
	if _, err := fsc.Stat(t.Context(), req2); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("Stat as unknown user: %v", err)
	}
}

// rpcError is a Connect unary error body.
type rpcError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// checkRPCError asserts a Connect unary JSON error answer.
func checkRPCError(t *testing.T, r response, status int, want rpcError) {
	t.Helper()
	var got rpcError
	if err := json.Unmarshal(r.body, &got); r.status != status || err != nil || got != want {
		t.Errorf("answer %d %s, want %d %+v", r.status, r.body, status, want)
	}
}

func TestWireRemove(t *testing.T) {
	// The SDKs' files.remove of a path that may not exist: envd answers {}.
	e := startEnvd(t, Config{})
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tree", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(dir, "tree"), filepath.Join(dir, "tree"), filepath.Join(dir, "never", "was")} {
		body, _ := json.Marshal(map[string]string{"path": path})
		if r := unary(t, e, "/filesystem.Filesystem/Remove", body); r.status != http.StatusOK || string(r.body) != "{}" {
			t.Errorf("Remove %s = %d %s, want 200 {}", path, r.status, r.body)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "tree")); !os.IsNotExist(err) {
		t.Errorf("tree still there: %v", err)
	}
}

func TestWireMakeDirOverAFile(t *testing.T) {
	// The JS SDK's makeDir answers false for already_exists only: a file in
	// the way, or above, is an error it throws.
	e := startEnvd(t, Config{})
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	makeDir := func(path string) response {
		body, _ := json.Marshal(map[string]string{"path": path})
		return unary(t, e, "/filesystem.Filesystem/MakeDir", body)
	}
	checkRPCError(t, makeDir(file), http.StatusBadRequest, rpcError{"invalid_argument", "path already exists but it is not a directory: " + file})
	checkRPCError(t, makeDir(file+"/sub/deeper"), http.StatusInternalServerError, rpcError{"internal", "error getting file info: stat " + file + "/sub/deeper: not a directory"})
	checkRPCError(t, makeDir(dir), http.StatusConflict, rpcError{"already_exists", "directory already exists: " + dir})
	// A symlink to a directory is a directory that exists.
	if err := os.Symlink(dir, filepath.Join(dir, "self")); err != nil {
		t.Fatal(err)
	}
	checkRPCError(t, makeDir(filepath.Join(dir, "self")), http.StatusConflict, rpcError{"already_exists", "directory already exists: " + filepath.Join(dir, "self")})
	if r := makeDir(filepath.Join(dir, "new", "dir")); r.status != http.StatusOK || !strings.Contains(string(r.body), `"type":"FILE_TYPE_DIRECTORY"`) {
		t.Errorf("MakeDir of a new path = %d %s", r.status, r.body)
	}
}

func TestFilesystemSymlinks(t *testing.T) {
	// A symlink has its target's type and mode and the resolved absolute
	// target, so that the SDKs' filters on directories see linked ones.
	e := startEnvd(t, Config{})
	fsc := e.filesystem()
	ctx := t.Context()
	dir := t.TempDir()
	for _, d := range []string{"real/inner", "links"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "real", "f.txt"), []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	links := filepath.Join(dir, "links")
	for name, target := range map[string]string{"to-dir": "../real", "to-file": "../real/f.txt", "broken": "../nowhere", "chain": "to-dir"} {
		if err := os.Symlink(target, filepath.Join(links, name)); err != nil {
			t.Fatal(err)
		}
	}
	stat := func(path string) *pb.EntryInfo {
		resp, err := fsc.Stat(ctx, connect.NewRequest(&pb.StatRequest{Path: path}))
		if err != nil {
			t.Fatalf("Stat %s: %v", path, err)
		}
		return resp.Msg.GetEntry()
	}
	type want struct {
		typ    pb.FileType
		mode   uint32
		target string
	}
	wants := map[string]want{
		"to-dir":  {pb.FileType_FILE_TYPE_DIRECTORY, 0o750, filepath.Join(dir, "real")},
		"chain":   {pb.FileType_FILE_TYPE_DIRECTORY, 0o750, filepath.Join(dir, "real")},
		"to-file": {pb.FileType_FILE_TYPE_FILE, 0o600, filepath.Join(dir, "real", "f.txt")},
		"broken":  {pb.FileType_FILE_TYPE_UNSPECIFIED, 0, filepath.Join(links, "broken")},
	}
	for name, w := range wants {
		e := stat(filepath.Join(links, name))
		if e.GetType() != w.typ || e.GetMode() != w.mode || e.GetSymlinkTarget() != w.target || e.GetPermissions() != "Lrwxrwxrwx" || e.GetName() != name || e.GetPath() != filepath.Join(links, name) {
			t.Errorf("Stat %s = %v, want type %v mode %o target %s", name, e, w.typ, w.mode, w.target)
		}
	}

	// Listed with the same entries; a linked directory is not descended into.
	resp, err := fsc.ListDir(ctx, connect.NewRequest(&pb.ListDirRequest{Path: links, Depth: 3}))
	if err != nil {
		t.Fatalf("ListDir: %v", err)
	}
	listed := map[string]*pb.EntryInfo{}
	for _, e := range resp.Msg.GetEntries() {
		listed[e.GetName()] = e
	}
	if len(listed) != len(wants) {
		t.Errorf("ListDir listed %v, want only the four links", listed)
	}
	for name, w := range wants {
		if e := listed[name]; e.GetType() != w.typ || e.GetMode() != w.mode || e.GetSymlinkTarget() != w.target {
			t.Errorf("listed %s = %v, want type %v mode %o target %s", name, e, w.typ, w.mode, w.target)
		}
	}

	// Listing through a link walks the target and names entries under the
	// requested path.
	resp, err = fsc.ListDir(ctx, connect.NewRequest(&pb.ListDirRequest{Path: filepath.Join(links, "to-dir")}))
	if err != nil {
		t.Fatalf("ListDir through a link: %v", err)
	}
	var paths []string
	for _, e := range resp.Msg.GetEntries() {
		paths = append(paths, e.GetPath())
	}
	if want := []string{filepath.Join(links, "to-dir", "f.txt"), filepath.Join(links, "to-dir", "inner")}; !slices.Equal(paths, want) {
		t.Errorf("ListDir through a link = %v, want %v", paths, want)
	}
	_, err = fsc.ListDir(ctx, connect.NewRequest(&pb.ListDirRequest{Path: filepath.Join(links, "broken")}))
	if connect.CodeOf(err) != connect.CodeNotFound || !strings.Contains(err.Error(), "path not found") {
		t.Errorf("ListDir of a broken link: %v", err)
	}
	loop := filepath.Join(dir, "loop")
	if err := os.Symlink("loop", loop); err != nil {
		t.Fatal(err)
	}
	_, err = fsc.ListDir(ctx, connect.NewRequest(&pb.ListDirRequest{Path: loop}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "cyclic symlink") {
		t.Errorf("ListDir of a symlink cycle: %v", err)
	}
	if e := stat(loop); e.GetType() != pb.FileType_FILE_TYPE_UNSPECIFIED || e.GetSymlinkTarget() != loop {
		t.Errorf("Stat of a symlink cycle = %v, want a broken link", e)
	}
	_, err = fsc.ListDir(ctx, connect.NewRequest(&pb.ListDirRequest{Path: filepath.Join(links, "to-file")}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "path is not a directory: "+filepath.Join(dir, "real", "f.txt")) {
		t.Errorf("ListDir of a link to a file: %v", err)
	}
}

// TestWireHomeRelativePaths resolves the paths the SDKs send as envd does:
// "~", "~/", "." and "" are the user's home ("" the default workdir once
// /init set one), "~user" is refused.
func TestWireHomeRelativePaths(t *testing.T) {
	e := startEnvd(t, Config{})
	root, err := lookupUser("root")
	if err != nil {
		t.Fatal(err)
	}
	stat := func(path string) response {
		body, _ := json.Marshal(map[string]string{"path": path})
		return unary(t, e, "/filesystem.Filesystem/Stat", body)
	}
	for _, path := range []string{"~", "~/", ".", ""} {
		if r := stat(path); r.status != http.StatusOK || !strings.Contains(string(r.body), `"path":"`+root.home+`"`) {
			t.Errorf("Stat %q = %d %s, want the entry of %s", path, r.status, r.body, root.home)
		}
	}
	checkRPCError(t, stat("~nobody/x"), http.StatusBadRequest, rpcError{"invalid_argument", "failed to expand path '~nobody/x' for user 'root': cannot expand user-specific home dir"})
	workdir := t.TempDir()
	initEnvd(t, e, `{"defaultWorkdir":"`+workdir+`"}`)
	if r := stat(""); r.status != http.StatusOK || !strings.Contains(string(r.body), `"path":"`+workdir+`"`) {
		t.Errorf("Stat \"\" with a default workdir = %d %s, want the entry of %s", r.status, r.body, workdir)
	}
	if r := stat("."); r.status != http.StatusOK || !strings.Contains(string(r.body), `"path":"`+root.home+`"`) {
		t.Errorf("Stat \".\" with a default workdir = %d %s, want the home %s", r.status, r.body, root.home)
	}
	// Remove and Move refuse an empty path, where envd would remove or move
	// the whole home directory (design/envd.md).
	checkRPCError(t, unary(t, e, "/filesystem.Filesystem/Remove", []byte(`{"path":""}`)), http.StatusBadRequest, rpcError{"invalid_argument", "path is empty"})
	checkRPCError(t, unary(t, e, "/filesystem.Filesystem/Move", []byte(`{"source":"","destination":"/tmp/x"}`)), http.StatusBadRequest, rpcError{"invalid_argument", "path is empty"})
}

// TestWireMissingPaths checks envd's messages for a Stat or Move of a path
// that does not exist.
func TestWireMissingPaths(t *testing.T) {
	e := startEnvd(t, Config{})
	dir := t.TempDir()
	missing, dst := filepath.Join(dir, "missing"), filepath.Join(dir, "new", "dst")
	body, _ := json.Marshal(map[string]string{"path": missing})
	checkRPCError(t, unary(t, e, "/filesystem.Filesystem/Stat", body), http.StatusNotFound,
		rpcError{"not_found", "file not found: lstat " + missing + ": no such file or directory"})
	body, _ = json.Marshal(map[string]string{"source": missing, "destination": dst})
	checkRPCError(t, unary(t, e, "/filesystem.Filesystem/Move", body), http.StatusNotFound,
		rpcError{"not_found", "source file not found: rename " + missing + " " + dst + ": no such file or directory"})
	if _, err := os.Stat(filepath.Dir(dst)); !os.IsNotExist(err) {
		t.Errorf("a failed Move made the destination's parent: %v", err)
	}
}
