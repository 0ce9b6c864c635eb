package build

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/buildcontext"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// nonGlobPrefix is the part of a COPY source before its first glob
// component: "src/*.js" → "src", "app" → "app", "*.txt" → ".". The source
// is checked again here, by buildcontext's rule: build steps come over the
// API from any client (E2B's SDKs too), not through a listing of this
// module, and a source outside the context would reach outside the
// destination.
func nonGlobPrefix(src string) (string, error) {
	clean, err := buildcontext.CleanSource("", src)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, part := range strings.Split(clean, "/") {
		if strings.ContainsAny(part, `*?[{\`) {
			break
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return ".", nil
	}
	return path.Join(parts...), nil
}

// copy runs a COPY/ADD step (args [src, dest, user, mode]) with Docker's
// COPY semantics. The stored archive, checked when it was uploaded, goes
// into the container by one route: it is extracted at the container's
// root from inside the container (Container.CopyTo), each entry renamed
// to its destination and given the step's owner and mode on the way
// (placement). Only the owner's IDs and what the destination is are
// asked of the container first, by a script that moves no file.
// A layer tar of our own registered with ImageLoad would spare the
// commit but costs about as much on Docker 20.10 (design/performance.md,
// "Local builds").
func (b *builder) copy(ctx context.Context, st e2b.TemplateStep) error {
	args := st.CopyArgs()
	src, dest, owner, mode := args.Src, args.Dest, args.User, args.Mode
	if src == "" {
		return errors.New("COPY has no source")
	}
	var perm int64 = -1
	if mode != "" {
		m, err := strconv.ParseUint(mode, 8, 32)
		if err != nil {
			return fmt.Errorf("COPY mode %q is not octal", mode)
		}
		perm = int64(m) & 0o7777
	}
	prefix, err := nonGlobPrefix(src)
	if err != nil {
		return err
	}
	archive, ok := b.spec.Archives[st.FilesHash]
	if !ok {
		return fmt.Errorf("no stored files for hash %q", st.FilesHash)
	}
	into := strings.HasSuffix(dest, "/") || dest == "" || dest == "."
	target, err := b.resolve(ctx, dest)
	if err != nil {
		return err
	}
	if owner == "" {
		owner = b.user
	}
	p, err := b.placement(ctx, owner, target, path.Join(target, path.Base(prefix)))
	if err != nil {
		return err
	}
	p.prefix, p.perm, p.into = prefix, perm, into

	f, err := os.Open(archive)
	if err != nil {
		return fmt.Errorf("stored files: %w", err)
	}
	defer f.Close()
	pr, pw := io.Pipe()
	rewritten := make(chan error, 1)
	go func() {
		err := buildcontext.Rewrite(pw, f, p.place)
		pw.CloseWithError(err)
		rewritten <- err
	}()
	err = b.c.CopyTo(ctx, "/", pr)
	pr.CloseWithError(errExtractionEnded) // stops Rewrite when the engine gave up early
	if rerr := <-rewritten; rerr != nil && !errors.Is(rerr, errExtractionEnded) {
		err = rerr // the archive's fault: the engine's error is only the broken stream
	}
	if err != nil {
		return fmt.Errorf("copying %s to %s: %w", src, target, err)
	}
	if p.kind == sourceNone {
		return fmt.Errorf("copying %s to %s: no uploaded files match %s", src, target, prefix)
	}
	return nil
}

// errExtractionEnded ends a rewrite whose extraction ended.
var errExtractionEnded = errors.New("extraction ended")

// placeScript asks the container, as root, what placement needs: the
// numeric user and group of owner $1 (user or user:group, names or IDs)
// and what $2 (the destination) and $3 (the destination joined with the
// source's base name) are: dir (a directory; for $2 a link to one too),
// other, or none.
const placeScript = `set -e
u="${1%%:*}"; g=
case "$1" in *:*) g="${1#*:}" ;; esac
case "$u" in ''|*[!0-9]*) uid=$(id -u "$u") ;; *) uid="$u" ;; esac
if [ -z "$g" ]; then
	gid=$(id -g "$u")
else
	case "$g" in
	*[!0-9]*)
		gid=$(awk -F: -v g="$g" '$1 == g { print $3; exit }' /etc/group)
		if [ -z "$gid" ]; then echo "unknown group $g" >&2; exit 1; fi ;;
	*) gid="$g" ;;
	esac
fi
kind() { if [ -d "$1" ]; then echo dir; elif [ -e "$1" ] || [ -L "$1" ]; then echo other; else echo none; fi; }
in=$(kind "$3")
if [ "$in" = dir ] && [ -L "$3" ]; then in=other; fi
echo "$uid $gid $(kind "$2") $in"
`

// placement renames a COPY source's archive entries to their place in the
// container, as Docker's COPY does:
//   - A directory's contents are merged into the destination: an existing
//     destination keeps its owner and mode, files are overwritten, symlinks
//     stay links; a missing one is the source directory.
//   - A file or symlink goes to the destination, or into it when it is a
//     directory or the step says so (a trailing slash); a missing
//     destination to copy into is made a directory of the owner.
//
// Every entry copied, and every directory made for it below the
// destination, gets the owner and, when the step gives one, the mode
// (symlinks keep theirs). Directories made above the destination are
// root's, as the engine makes them.
type placement struct {
	prefix   string // the source's non-glob prefix, an archive path
	perm     int64  // the step's mode; -1: the archive's
	into     bool
	uid, gid int
	// What the destination is and, for a file source, the destination
	// joined with its base name.
	dest, destKind, inDestKind string

	kind sourceKind
	// target is where the source itself goes; made holds the directories
	// below it written so far.
	target string
	made   map[string]bool
}

type sourceKind int

const (
	sourceNone sourceKind = iota
	sourceFile
	sourceDir
)

// placement asks the container for owner's IDs and what dest and inDest
// are.
func (b *builder) placement(ctx context.Context, owner, dest, inDest string) (*placement, error) {
	out, err := b.root(ctx, "looking up "+owner+" and "+dest, placeScript, owner, dest, inDest)
	if err != nil {
		return nil, err
	}
	f := strings.Fields(out)
	if len(f) != 4 {
		return nil, fmt.Errorf("looking up %s and %s: unexpected answer %q", owner, dest, out)
	}
	uid, uerr := strconv.Atoi(f[0])
	gid, gerr := strconv.Atoi(f[1])
	if uerr != nil || gerr != nil {
		return nil, fmt.Errorf("looking up %s: unexpected IDs %q", owner, out)
	}
	return &placement{uid: uid, gid: gid, dest: dest, destKind: f[2], inDestKind: f[3], made: map[string]bool{}}, nil
}

// place is Rewrite's edit: entries outside the source are dropped, the
// others renamed below the target and owned.
func (p *placement) place(h *tar.Header) ([]*tar.Header, error) {
	rel, ok := relativeTo(p.prefix, h.Name)
	if !ok {
		return nil, nil
	}
	var out []*tar.Header
	switch p.kind {
	case sourceNone:
		if err := p.start(rel, h); err != nil {
			return nil, err
		}
		if p.kind == sourceDir && rel != "." && p.destKind == "none" {
			// The archive has no entry of the directory itself.
			out = append(out, p.dir(p.target, true))
		}
		if p.kind == sourceFile && p.into && p.destKind == "none" {
			out = append(out, p.dir(p.dest, false))
		}
	case sourceFile:
		return nil, fmt.Errorf("the archive holds %s below the file %s", h.Name, p.prefix)
	case sourceDir:
	}
	name := p.target
	if rel != "." {
		name = path.Join(p.target, rel)
		// Directories the archive has no entry of, made for this one.
		var missing []string
		for d := path.Dir(rel); d != "." && !p.made[d]; d = path.Dir(d) {
			missing = append(missing, d)
		}
		for i := len(missing) - 1; i >= 0; i-- {
			p.made[missing[i]] = true
			out = append(out, p.dir(path.Join(p.target, missing[i]), true))
		}
		if h.Typeflag == tar.TypeDir {
			p.made[rel] = true
		}
	} else if p.kind == sourceDir && p.destKind != "none" {
		return out, nil // an existing destination keeps its owner and mode
	}
	if h.Typeflag == tar.TypeLink {
		linkRel, ok := relativeTo(p.prefix, h.Linkname)
		if !ok {
			return nil, fmt.Errorf("the hard link %s points outside %s", h.Name, p.prefix)
		}
		h.Linkname = strings.TrimPrefix(path.Join(p.target, linkRel), "/")
	}
	h.Name = strings.TrimPrefix(name, "/")
	p.own(h, p.perm)
	return append(out, h), nil
}

// start learns from the source's first entry whether it is a file or a
// directory, and where it goes.
func (p *placement) start(rel string, h *tar.Header) error {
	if rel != "." || h.Typeflag == tar.TypeDir {
		p.kind, p.target = sourceDir, p.dest
		if p.destKind == "other" {
			return fmt.Errorf("%s exists and is not a directory", p.dest)
		}
		return nil
	}
	p.kind, p.target = sourceFile, p.dest
	kind := p.destKind
	if p.into || p.destKind == "dir" {
		p.target, kind = path.Join(p.dest, path.Base(p.prefix)), p.inDestKind
	}
	if kind == "dir" {
		return fmt.Errorf("cannot overwrite the directory %s with a file", p.target)
	}
	return nil
}

// dir is the header of a directory made for the copy: the owner's, 0755
// or, withMode, the step's mode when it gives one (a directory of the
// source has it; one made to copy a file into has not).
func (p *placement) dir(name string, withMode bool) *tar.Header {
	h := &tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(name, "/"), Mode: 0o755}
	perm := int64(-1)
	if withMode {
		perm = p.perm
	}
	p.own(h, perm)
	return h
}

// own gives h the owner and, but for a symlink, perm (-1: none).
func (p *placement) own(h *tar.Header, perm int64) {
	h.Uid, h.Gid, h.Uname, h.Gname = p.uid, p.gid, "", ""
	if perm >= 0 && h.Typeflag != tar.TypeSymlink {
		h.Mode = h.Mode&^0o7777 | perm
	}
}

// relativeTo is name relative to the archive path prefix ("." for prefix
// itself); false when name is not prefix or below it.
func relativeTo(prefix, name string) (string, bool) {
	switch {
	case prefix == ".":
		return name, true
	case name == prefix:
		return ".", true
	case strings.HasPrefix(name, prefix+"/"):
		return name[len(prefix)+1:], true
	}
	return "", false
}
