package server

import (
	"os"
	"path/filepath"
	"slices"
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
	t.Run("Stat file and symlink", func(t *testing.T) {
		file := filepath.Join(dir, "file.txt")
		if err := os.WriteFile(file, []byte("12345"), 0o640); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, "link")
		if err := os.Symlink(file, link); err != nil {
			t.Fatal(err)
		}
		resp, err := fsc.Stat(ctx, connect.NewRequest(&pb.StatRequest{Path: file}))
		if err != nil {
			t.Fatalf("Stat: %v", err)
		}
		if e := resp.Msg.GetEntry(); e.GetType() != pb.FileType_FILE_TYPE_FILE || e.GetSize() != 5 || e.GetMode() != 0o640 || e.GetPermissions() != "-rw-r-----" || e.SymlinkTarget != nil {
			t.Errorf("Stat file %v", e)
		}
		resp, err = fsc.Stat(ctx, connect.NewRequest(&pb.StatRequest{Path: link}))
		if err != nil {
			t.Fatalf("Stat link: %v", err)
		}
		if e := resp.Msg.GetEntry(); e.GetType() != pb.FileType_FILE_TYPE_SYMLINK || e.GetSymlinkTarget() != file {
			t.Errorf("Stat symlink %v", e)
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
		_, err = fsc.Remove(ctx, connect.NewRequest(&pb.RemoveRequest{Path: dst}))
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("Remove missing: %v", err)
		}
	})
	t.Run("permission denied", func(t *testing.T) {
		// Even root may not unlink procfs entries.
		_, err := fsc.Remove(ctx, connect.NewRequest(&pb.RemoveRequest{Path: "/proc/1/status"}))
		if connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Errorf("Remove /proc/1/status: %v, want permission_denied", err)
		}
	})
	t.Run("watchers are unimplemented", func(t *testing.T) {
		_, err := fsc.CreateWatcher(ctx, connect.NewRequest(&pb.CreateWatcherRequest{Path: dir}))
		if connect.CodeOf(err) != connect.CodeUnimplemented {
			t.Errorf("CreateWatcher: %v", err)
		}
		stream, err := fsc.WatchDir(ctx, connect.NewRequest(&pb.WatchDirRequest{Path: dir}))
		if err == nil {
			for stream.Receive() {
			}
			err = stream.Err()
		}
		if connect.CodeOf(err) != connect.CodeUnimplemented {
			t.Errorf("WatchDir: %v", err)
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
