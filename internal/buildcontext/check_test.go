package buildcontext

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	tu "github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

func TestCheckArchiveAcceptsContextArchives(t *testing.T) {
	entries := []tu.TarEntry{
		{Name: "pax-global", Typ: tar.TypeXGlobalHeader},
		tu.Dir("./"),
		tu.Dir("app/"),
		tu.File("app/a.txt", "A"),
		tu.Symlink("app/link", "a.txt"),
		tu.Dir("app/sub/"),
		tu.Symlink("app/sub/up", "../a.txt"),
		tu.Symlink("app/sub/self", "."),
		tu.Hardlink("app/hard", "app/a.txt"),
		tu.File("./top.txt", "top"),
		// Links are carried as links wherever they point, as Docker's COPY does.
		tu.Symlink("app/out", "../../outside"),
		tu.Symlink("zero", "/dev/zero"),
		tu.Symlink("a/b", ".."),
		tu.Symlink("x", "a/b/.."),
	}
	for _, gz := range []bool{true, false} {
		gzipped, err := CheckArchive(bytes.NewReader(tu.Tarball(t, gz, entries...)), ArchiveLimits{})
		if err != nil {
			t.Fatalf("gzip=%v: %v", gz, err)
		}
		if gzipped != gz {
			t.Errorf("gzip=%v: detected gzip=%v", gz, gzipped)
		}
	}
}

func TestCheckArchiveRejectsUnsafeEntries(t *testing.T) {
	cases := []struct {
		name    string
		entries []tu.TarEntry
		want    string
	}{
		{"empty name", []tu.TarEntry{tu.File("", "x")}, `"": empty name`},
		{"backslash", []tu.TarEntry{tu.File(`..\evil`, "x")}, `"..\\evil": invalid name`},
		{"absolute name", []tu.TarEntry{tu.File("/etc/passwd", "x")}, `"/etc/passwd": absolute name`},
		{"parent", []tu.TarEntry{tu.File("../evil", "x")}, `"../evil": name contains ".."`},
		{"dot dot below", []tu.TarEntry{tu.File("a/../../x", "x")}, `"a/../../x": name contains ".."`},
		{"dot dot inside", []tu.TarEntry{tu.File("a/../b", "x")}, `"a/../b": name contains ".."`},
		{"write through symlink", []tu.TarEntry{tu.Symlink("d", "."), tu.File("d/x", "x")}, `"d/x": lies below the symlink "d", so it would be written through it`},
		{"write through an outside symlink", []tu.TarEntry{tu.Symlink("d", "/etc"), tu.File("d/passwd", "x")}, `"d/passwd": lies below the symlink "d", so it would be written through it`},
		{"write through an inner symlink", []tu.TarEntry{tu.Symlink("d", "sub"), tu.File("d/e/x", "x")}, `"d/e/x": lies below the symlink "d", so it would be written through it`},
		{"hard link through a symlink", []tu.TarEntry{tu.Symlink("d", "/etc"), tu.Hardlink("h", "d/shadow")}, `"h": hard link to "d/shadow" passes through the symlink "d"`},
		{"symlink as the root", []tu.TarEntry{tu.Symlink("./", "/etc")}, `a symlink cannot replace the directory`},
		{"symlink replaced by dir", []tu.TarEntry{tu.Symlink("d", "sub"), tu.Dir("d/"), tu.File("d/x", "x")}, `"d/x": lies below the symlink "d", so it would be written through it`},
		{"hard link out", []tu.TarEntry{tu.Hardlink("h", "../x")}, `"h": hard link to "../x": name contains ".."`},
		{"hard link far out", []tu.TarEntry{tu.Hardlink("h", "../../etc/passwd")}, `"h": hard link to "../../etc/passwd"`},
		{"hard link absolute", []tu.TarEntry{tu.Hardlink("h", "/etc/shadow")}, `"h": hard link to "/etc/shadow": absolute name`},
		{"device", []tu.TarEntry{{Name: "dev", Typ: tar.TypeChar}}, `"dev": unsupported entry type`},
		{"block device", []tu.TarEntry{{Name: "blk", Typ: tar.TypeBlock}}, `"blk": unsupported entry type`},
		{"fifo", []tu.TarEntry{{Name: "p", Typ: tar.TypeFifo}}, `"p": unsupported entry type`},
		{"after a good entry", []tu.TarEntry{tu.File("ok.txt", "ok"), tu.File("../evil", "x")}, `"../evil"`},
	}
	for _, tc := range cases {
		for _, gz := range []bool{true, false} {
			_, err := CheckArchive(bytes.NewReader(tu.Tarball(t, gz, tc.entries...)), ArchiveLimits{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s (gzip=%v): error %v, want it to contain %s", tc.name, gz, err, tc.want)
			}
			if !errors.Is(err, ErrUnsafeArchive) {
				t.Errorf("%s (gzip=%v): error %v is not ErrUnsafeArchive", tc.name, gz, err)
			}
		}
	}
}

func TestCheckArchiveRejectsGarbage(t *testing.T) {
	for name, data := range map[string][]byte{
		"broken gzip": []byte("\x1f\x8bnot gzip at all"),
		"not a tar":   bytes.Repeat([]byte("x"), 1024),
		"short text":  []byte("not a tar at all, just some text"),
		"empty":       nil,
		"no entries":  tu.Tarball(t, true),
	} {
		if _, err := CheckArchive(bytes.NewReader(data), ArchiveLimits{}); !errors.Is(err, ErrUnsafeArchive) {
			t.Errorf("%s: error %v, want ErrUnsafeArchive", name, err)
		}
	}
}

func TestCheckArchiveReportsReadFailures(t *testing.T) {
	failure := errors.New("disk on fire")
	archive := tu.Tarball(t, false, tu.File("a.txt", strings.Repeat("a", 4096)))
	_, err := CheckArchive(io.MultiReader(bytes.NewReader(archive[:1024]), iotest.ErrReader(failure)), ArchiveLimits{})
	if !errors.Is(err, failure) || errors.Is(err, ErrUnsafeArchive) {
		t.Fatalf("error %v, want the read failure and not ErrUnsafeArchive", err)
	}
}

func TestCheckArchiveLimits(t *testing.T) {
	archive := tu.Tarball(t, true,
		tu.TarEntry{Name: "pax-global", Typ: tar.TypeXGlobalHeader},
		tu.File("a.txt", "a"),
		tu.File("b.txt", "b"))
	if _, err := CheckArchive(bytes.NewReader(archive), ArchiveLimits{MaxEntries: 3, MaxUnpackedBytes: 1 << 20}); err != nil {
		t.Fatalf("within the limits: %v", err)
	}
	if _, err := CheckArchive(bytes.NewReader(archive), ArchiveLimits{MaxEntries: 2}); !errors.Is(err, ErrUnsafeArchive) || !strings.Contains(err.Error(), "more than the limit of 2 entries") {
		t.Errorf("entry limit: %v", err)
	}
	if _, err := CheckArchive(bytes.NewReader(archive), ArchiveLimits{MaxUnpackedBytes: 1000}); !errors.Is(err, ErrUnsafeArchive) || !strings.Contains(err.Error(), "more than the limit of 1000 bytes") {
		t.Errorf("size limit: %v", err)
	}
	// A small gzip whose one entry's content passes the limit.
	zeros := tu.Tarball(t, true, tu.File("zeros", strings.Repeat("\x00", 20000)))
	if len(zeros) > 8192 {
		t.Fatalf("test archive is %d bytes compressed, want it below the limit", len(zeros))
	}
	if _, err := CheckArchive(bytes.NewReader(zeros), ArchiveLimits{MaxUnpackedBytes: 8192}); !errors.Is(err, ErrUnsafeArchive) || !strings.Contains(err.Error(), "unpacks to more than the limit of 8192 bytes") {
		t.Errorf("content size limit: %v", err)
	}
}

// TestListingCheckEntries applies CheckArchive's rules to a listing: links pointing
// anywhere pass, an entry below a link is refused by name.
func TestListingCheckEntries(t *testing.T) {
	ok := &Listing{Entries: []Entry{
		{Path: ".", Kind: KindDir}, {Path: "x", Kind: KindSymlink, LinkTarget: "../../outside"},
		{Path: "zero", Kind: KindSymlink, LinkTarget: "/dev/zero"},
	}}
	if err := ok.CheckEntries(); err != nil {
		t.Errorf("links out of the context: %v", err)
	}
	bad := &Listing{Entries: []Entry{{Path: "d", Kind: KindSymlink, LinkTarget: "/etc"}, {Path: "d/passwd", Kind: KindFile}}}
	if err := bad.CheckEntries(); !errors.Is(err, ErrUnsafeArchive) || !strings.Contains(err.Error(), `d/passwd: lies below the symlink "d"`) {
		t.Errorf("entry below a link: %v", err)
	}
}
