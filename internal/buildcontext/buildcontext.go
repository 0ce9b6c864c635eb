// Package buildcontext lists the files a COPY step takes from a build context, hashes them
// (the portable files hash v1, or the E2B SDK-compatible hash) and writes the deterministic
// gzip'd tar archive that is uploaded for the step. It follows design/hashing.md.
//
// A step takes two walks of its context, one for the hash at plan and one for the
// archive at apply, which checks the files against the planned hash as it writes them;
// neither holds a listing (memory bounded whatever the number of files):
//
//	cachePath, _ := buildcontext.DefaultStatCachePath()
//	cache := buildcontext.OpenStatCache(cachePath)
//	sum, err := buildcontext.StreamPortableHash(ctx, contextDir, src, dest, listOpts, buildcontext.HashOptions{Cache: cache})
//	_ = cache.Save() // best effort: a cache that cannot be written only costs speed
//	path, size, err := buildcontext.SpoolArchive("", src, func(w io.Writer) error {
//		return buildcontext.WriteStepArchive(ctx, w, contextDir, src, dest, listOpts,
//			buildcontext.ArchiveCheck{PortableHash: sum.Hash}) // checks every file against the plan
//	})
//
// StreamSDKHash and ArchiveCheck.SDKHash do the same in the SDK-compatible mode, with the
// cache the plan filled (ArchiveCheck.Cache): without it the archive hashes the step again.
// The tests keep a listing that holds every entry (listing_test.go), the plain form of the
// same rules, to check the streams against.
//
// Decisions the spec leaves open:
//   - Symlinks are listed as links (target text recorded, nothing read through them) wherever
//     they point. With ListOptions.ResolveLinks a link whose target is inside the context is
//     replaced by the target (a file's bytes, or a directory and everything below it, under
//     the link's path); a link pointing outside is then an error, and a dangling link inside
//     stays a link. A src that passes through a symlinked directory is always an error.
//   - Extra ignore patterns are applied after the .dockerignore lines (the configuration
//     wins: "!x" there re-includes x). An excluded directory is listed when an exception
//     re-includes something below it, as BuildKit sends it, so the archive has its parent.
//   - Directories that a src glob passes through are not entries (as in the SDK); only
//     matches and what lies below matched directories are.
//   - The SDK-compatible hash uses this walk too, so it matches the SDK exactly unless a
//     .dockerignore relies on the SDK's glob quirk (an ignored directory's children kept).
//   - The digest cache is keyed by stat identity only (not path), lives in
//     DefaultStatCachePath and holds at most 1,048,576 (2^20) digests. It also holds SDK-compatible
//     step hashes, keyed by a fingerprint of what they cover (StreamSDKHash).
//
// The package knows nothing of Terraform.
package buildcontext

import (
	"crypto/sha256"
	"io/fs"
	"path/filepath"
)

// Kind is the type of a listed entry.
type Kind uint8

const (
	KindFile Kind = iota + 1
	KindDir
	KindSymlink
)

func (k Kind) String() string {
	switch k {
	case KindFile:
		return "file"
	case KindDir:
		return "dir"
	case KindSymlink:
		return "symlink"
	}
	return "unknown"
}

// FileID is the stat identity of a file: the key of the digest cache. A cached digest is
// trusted only when every field matches.
type FileID struct {
	Dev     uint64
	Ino     uint64
	Size    int64
	MtimeNs int64
	CtimeNs int64
	Mode    uint32 // raw st_mode, file-type bits included
}

// Entry is one listed file, directory or symlink.
type Entry struct {
	// Path is relative to the context, "/"-separated; "." is the context directory itself.
	Path string
	Kind Kind
	// digested says SHA256 is set (here, where the struct has room for it).
	digested bool
	// Perm holds the permission bits found on disk (not normalised).
	Perm fs.FileMode
	// Size is st_size: the byte count of a file, the length of a link's target text, and
	// a filesystem-dependent number for a directory.
	Size int64
	// LinkTarget is the target text of a symlink.
	LinkTarget string
	// ID is the stat identity; ID.Mode is the raw st_mode the SDK-compatible hash uses.
	ID FileID
	// SHA256 is the digest of a file's bytes, set by the hash that read it
	// (HasDigest). Kept as bytes, not hex: a listing holds one per file.
	SHA256 [sha256.Size]byte

	// resolved is the absolute path of what a symlink resolved by the listing points to,
	// which is read instead of the context path joined with Path.
	resolved string
	// cacheMiss is where the digest cache awaits this file's digest (StatCache.lookup).
	cacheMiss uint32
}

// HasDigest reports whether SHA256 is set.
func (e *Entry) HasDigest() bool { return e.digested }

func (e *Entry) setDigest(sum [sha256.Size]byte) { e.SHA256, e.digested = sum, true }

// normalisedPerm is the mode an entry has in the portable hash and the archive.
func (e *Entry) normalisedPerm() fs.FileMode {
	switch e.Kind {
	case KindDir:
		return 0o755
	case KindSymlink:
		return 0o777
	}
	if e.Perm&0o111 != 0 {
		return 0o755
	}
	return 0o644
}

// childStat is what the listing needs of one lstat: the Go mode (as os.Lstat gives it),
// the stat identity, or the error.
type childStat struct {
	mode fs.FileMode
	id   FileID
	err  error
}

// statOf is the childStat of an fs.FileInfo from os.Lstat.
func statOf(fi fs.FileInfo) childStat {
	id, _ := identityOf(fi)
	return childStat{mode: fi.Mode(), id: id}
}

// portableIdentity builds a FileID from what fs.FileInfo offers on every system, with a
// POSIX st_mode synthesised from the Go mode.
func portableIdentity(fi fs.FileInfo) (FileID, uint32) {
	const sIFREG, sIFDIR, sIFLNK = 0o100000, 0o040000, 0o120000
	mode := uint32(fi.Mode().Perm())
	switch {
	case fi.Mode().IsDir():
		mode |= sIFDIR
	case fi.Mode()&fs.ModeSymlink != 0:
		mode |= sIFLNK
	default:
		mode |= sIFREG
	}
	return FileID{Size: fi.Size(), MtimeNs: fi.ModTime().UnixNano(), Mode: mode}, mode
}

// sourcePath is the file to read for e, listed in the context root.
func sourcePath(root string, e *Entry) string {
	if e.resolved != "" {
		return e.resolved
	}
	return filepath.Join(root, filepath.FromSlash(e.Path))
}
