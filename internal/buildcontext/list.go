package buildcontext

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// ListOptions tunes List.
type ListOptions struct {
	// IgnorePatterns are applied after the lines of <context>/.dockerignore, with the same
	// (Docker) semantics, so a "!" pattern here can re-include what the file excludes.
	IgnorePatterns []string
	// ResolveLinks replaces a symlink whose target lies inside the context by what it points
	// to (a file's bytes, a directory and everything below it). A link whose target lies
	// outside the context is then an error. Without it every symlink is listed as a link
	// with its target text, wherever it points, and nothing is read through it.
	ResolveLinks bool
}

// List lists the entries the COPY source src takes from contextDir, following
// hashing.md §1: src is relative and stays inside the context; .dockerignore and
// opts.IgnorePatterns exclude entries with Docker's semantics; src may be a glob (`*`, `?`,
// `[...]`, `**`; dotfiles match); a matched directory brings itself and everything below
// it; symlinks are never followed (see ListOptions.ResolveLinks); sockets, FIFOs and
// devices are errors unless ignored; an empty result is an error.
func List(contextDir, src string, opts ListOptions) (*Listing, error) {
	pattern, err := cleanSrc(src)
	if err != nil {
		return nil, err
	}
	root, err := contextRoot(contextDir)
	if err != nil {
		return nil, err
	}
	glob, err := newSegmentGlob(pattern)
	if err != nil {
		return nil, &contextError{fmt.Sprintf("COPY source %q is not a valid pattern: %v", src, err), ErrInvalidSrc}
	}
	ign, err := loadIgnore(root, opts.IgnorePatterns)
	if err != nil {
		return nil, err
	}
	l := &lister{root: root, ignore: ign, resolve: opts.ResolveLinks, onPath: map[[2]uint64]bool{}}
	prefix, rest := glob.literalPrefix()
	l.glob = rest
	if err := l.walkFromPrefix(prefix); err != nil {
		return nil, err
	}
	if len(l.entries) == 0 {
		return nil, &contextError{fmt.Sprintf("no files match %s in %s", src, root), ErrNoMatch}
	}
	slices.SortFunc(l.entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	return &Listing{Context: root, Src: src, Entries: l.entries}, nil
}

// cleanSrc validates src and returns its cleaned "/"-separated form.
func cleanSrc(src string) (string, error) {
	if src == "" {
		return "", &contextError{"COPY source is empty", ErrInvalidSrc}
	}
	if path.IsAbs(src) || filepath.IsAbs(src) {
		return "", &contextError{fmt.Sprintf("COPY source %q is absolute; it must be relative to the build context", src), ErrInvalidSrc}
	}
	cleaned := path.Clean(src)
	if cleaned == ".." || strings.HasPrefix(cleaned, "../") {
		return "", &contextError{fmt.Sprintf("COPY source %q escapes the build context", src), ErrInvalidSrc}
	}
	return cleaned, nil
}

func contextRoot(contextDir string) (string, error) {
	abs, err := filepath.Abs(contextDir)
	if err != nil {
		return "", fmt.Errorf("build context directory %q: %w", contextDir, err)
	}
	root, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("build context directory %s does not exist", abs)
		}
		return "", fmt.Errorf("build context directory %s: %w", abs, err)
	}
	fi, err := os.Stat(root)
	if err != nil {
		return "", fmt.Errorf("build context directory %s: %w", abs, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("build context %s is not a directory", abs)
	}
	return root, nil
}

// ignoreRules is the compiled .dockerignore plus extra patterns.
type ignoreRules struct {
	pm *patternmatcher.PatternMatcher
	// exceptions are the "!" patterns as segment globs, used to decide whether an excluded
	// directory can hold a re-included entry; nil with anyException set means "cannot tell,
	// always look inside".
	exceptions   []*segmentGlob
	anyException bool
	unsure       bool
}

func loadIgnore(root string, extra []string) (*ignoreRules, error) {
	var patterns []string
	name := filepath.Join(root, ".dockerignore")
	if f, err := os.Open(name); err == nil {
		patterns, err = ignorefile.ReadAll(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	more, err := ignorefile.ReadAll(strings.NewReader(strings.Join(extra, "\n")))
	if err != nil {
		return nil, fmt.Errorf("ignore patterns: %w", err)
	}
	patterns = append(patterns, more...)
	if len(patterns) == 0 {
		return &ignoreRules{}, nil
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		return nil, fmt.Errorf("ignore patterns (.dockerignore and configured): %w", err)
	}
	r := &ignoreRules{pm: pm}
	for _, p := range pm.Patterns() {
		if !p.Exclusion() {
			continue
		}
		r.anyException = true
		g, err := exceptionGlob(p.String())
		if err != nil {
			r.unsure = true
			continue
		}
		r.exceptions = append(r.exceptions, g)
	}
	return r, nil
}

// exceptionGlob converts an exception pattern to a segment glob when the two agree on
// which paths can match; "**" inside a segment crosses "/" in patternmatcher, so such
// patterns are reported as unsupported.
func exceptionGlob(p string) (*segmentGlob, error) {
	for _, s := range strings.Split(p, "/") {
		if s != "**" && strings.Contains(s, "**") {
			return nil, errors.New("** inside a segment")
		}
	}
	return newSegmentGlob(p)
}

// excluded reports whether rel is ignored, given the match info of its parent.
func (r *ignoreRules) excluded(rel string, parent patternmatcher.MatchInfo) (bool, patternmatcher.MatchInfo, error) {
	if r.pm == nil || rel == "." {
		return false, patternmatcher.MatchInfo{}, nil
	}
	ex, info, err := r.pm.MatchesUsingParentResults(rel, parent)
	if err != nil {
		return false, info, fmt.Errorf("matching ignore patterns against %s: %w", rel, err)
	}
	return ex, info, nil
}

// mayReinclude reports whether an exception pattern could match something below the
// excluded directory rel, so the walk must look inside it.
func (r *ignoreRules) mayReinclude(rel string) bool {
	if !r.anyException {
		return false
	}
	if r.unsure {
		return true
	}
	segs := strings.Split(rel, "/")
	for _, g := range r.exceptions {
		s := g.start()
		for _, seg := range segs {
			s = g.step(s, seg)
		}
		if g.alive(s) {
			return true
		}
	}
	return false
}

type lister struct {
	root    string
	ignore  *ignoreRules
	glob    *segmentGlob
	resolve bool
	entries []Entry
	// onPath holds the (device, inode) of the directories being walked, to stop a
	// resolved symlink from looping.
	onPath map[[2]uint64]bool
}

// pendingDir is a directory inside the matched part of the tree whose entry is written
// just before its first listed descendant: an excluded directory appears only when an
// exception re-includes something below it.
type pendingDir struct {
	entry   Entry
	parent  *pendingDir
	emitted bool
}

func (l *lister) emit(p *pendingDir) {
	if p == nil || p.emitted {
		return
	}
	l.emit(p.parent)
	p.emitted = true
	l.entries = append(l.entries, p.entry)
}

// walkFromPrefix checks the literal leading segments of src (no symlinks among the
// directories, ignore state carried down) and walks the last of them.
func (l *lister) walkFromPrefix(prefix []string) error {
	rel, abs := ".", l.root
	var info patternmatcher.MatchInfo
	for _, seg := range prefix {
		if rel != "." {
			// rel is a directory on the way to the base.
			fi, err := os.Lstat(abs)
			if err != nil {
				return l.missing(err, rel)
			}
			if fi.Mode()&fs.ModeSymlink != 0 {
				return &contextError{fmt.Sprintf("COPY source passes through the symlink %s; name the path it points to instead", rel), ErrInvalidSrc}
			}
			if !fi.IsDir() {
				return nil
			}
			_, info, err = l.ignore.excluded(rel, info)
			if err != nil {
				return err
			}
		}
		rel, abs = joinRel(rel, seg), filepath.Join(abs, filepath.FromSlash(seg))
	}
	fi, err := os.Lstat(abs)
	if err != nil {
		return l.missing(err, rel)
	}
	return l.visit(rel, abs, fi, info, l.glob.start(), false, nil)
}

func (l *lister) missing(err error, rel string) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil // reported as an empty match
	}
	return fmt.Errorf("reading %s in build context %s: %w", rel, l.root, err)
}

func joinRel(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// visit lists rel (lstat'ed as fi) and, for a directory, what lies below it. gs is the
// glob state after rel's own name; inMatch says an ancestor already matched src.
func (l *lister) visit(rel, abs string, fi fs.FileInfo, parentIgnore patternmatcher.MatchInfo, gs globState, inMatch bool, parent *pendingDir) error {
	excluded, ignoreInfo, err := l.ignore.excluded(rel, parentIgnore)
	if err != nil {
		return err
	}
	matched := inMatch || l.glob.matched(gs)
	if !matched && !fi.IsDir() {
		return nil
	}
	source := abs
	if fi.Mode()&fs.ModeSymlink != 0 && l.resolve && !excluded {
		resolved, rfi, err := l.resolveLink(rel, abs)
		if err != nil {
			return err
		}
		if rfi != nil {
			source, fi = resolved, rfi
		}
	}
	mode := fi.Mode()
	switch {
	case mode.IsRegular(), mode&fs.ModeSymlink != 0:
		if excluded || !matched {
			return nil
		}
		e, err := newEntry(rel, abs, source, fi)
		if err != nil {
			return err
		}
		l.emit(parent)
		l.entries = append(l.entries, e)
		return nil
	case mode.IsDir():
		if !matched && !l.glob.alive(gs) {
			return nil
		}
		if excluded && !l.ignore.mayReinclude(rel) {
			return nil
		}
		return l.walkDir(rel, abs, source, fi, ignoreInfo, gs, matched, excluded, parent)
	default:
		if excluded || !matched {
			return nil
		}
		return &contextError{fmt.Sprintf("%s in build context %s is a %s, which cannot be copied; add it to .dockerignore", rel, l.root, specialKind(mode)), ErrSpecialFile}
	}
}

func (l *lister) walkDir(rel, abs, source string, fi fs.FileInfo, ignoreInfo patternmatcher.MatchInfo, gs globState, matched, excluded bool, parent *pendingDir) error {
	id, _ := identityOf(fi)
	key := [2]uint64{id.Dev, id.Ino}
	if l.onPath[key] {
		return &contextError{fmt.Sprintf("symlink cycle: %s leads back to a directory above it", rel), errSymlinkCycle}
	}
	l.onPath[key] = true
	defer delete(l.onPath, key)

	var self *pendingDir
	if matched {
		e, err := newEntry(rel, abs, source, fi)
		if err != nil {
			return err
		}
		self = &pendingDir{entry: e, parent: parent}
		if !excluded {
			l.emit(self)
		}
	}
	children, err := os.ReadDir(source)
	if err != nil {
		return fmt.Errorf("reading directory %s in build context %s: %w", rel, l.root, err)
	}
	infos, errs := lstatChildren(source, children)
	for i, c := range children {
		childAbs := filepath.Join(abs, c.Name())
		cfi, err := infos[i], errs[i]
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since ReadDir
			}
			return fmt.Errorf("reading %s in build context %s: %w", joinRel(rel, c.Name()), l.root, err)
		}
		var cgs globState
		if !matched {
			cgs = l.glob.step(gs, c.Name())
		}
		if err := l.visit(joinRel(rel, c.Name()), childAbs, cfi, ignoreInfo, cgs, matched, self); err != nil {
			return err
		}
	}
	return nil
}

// lstatChildren lstats the entries of a directory, spread over GOMAXPROCS goroutines
// when there are many: listing is bound by these system calls.
func lstatChildren(dir string, children []fs.DirEntry) ([]fs.FileInfo, []error) {
	infos := make([]fs.FileInfo, len(children))
	errs := make([]error, len(children))
	stat, done, err := childStatter(dir)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return infos, errs
	}
	defer done()
	lstatRange := func(from, to int) {
		for i := from; i < to; i++ {
			infos[i], errs[i] = stat(children[i].Name())
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(children)/minLstatsPerWorker)
	if workers <= 1 {
		lstatRange(0, len(children))
		return infos, errs
	}
	var wg sync.WaitGroup
	chunk := (len(children) + workers - 1) / workers
	for from := 0; from < len(children); from += chunk {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lstatRange(from, min(from+chunk, len(children)))
		}()
	}
	wg.Wait()
	return infos, errs
}

// minLstatsPerWorker keeps goroutines for directories where they pay off.
const minLstatsPerWorker = 32

// resolveLink follows a symlink for ListOptions.ResolveLinks. It returns the target's
// path and lstat, or a nil FileInfo when the target does not exist (the link is then
// listed as a link). A target outside the context is an error.
func (l *lister) resolveLink(rel, abs string) (string, fs.FileInfo, error) {
	target, err := os.Readlink(abs)
	if err != nil {
		return "", nil, fmt.Errorf("reading symlink %s in build context %s: %w", rel, l.root, err)
	}
	outside := func(where string) error {
		return &contextError{fmt.Sprintf("symlink %s in build context %s points outside the context (%s -> %s)", rel, l.root, target, where), ErrLinkOutside}
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return "", nil, fmt.Errorf("resolving symlink %s in build context %s: %w", rel, l.root, err)
		}
		lexical := target
		if !filepath.IsAbs(lexical) {
			lexical = filepath.Join(filepath.Dir(abs), lexical)
		}
		if !within(l.root, lexical) {
			return "", nil, outside(lexical)
		}
		return "", nil, nil
	}
	if !within(l.root, resolved) {
		return "", nil, outside(resolved)
	}
	fi, err := os.Lstat(resolved)
	if err != nil {
		return "", nil, fmt.Errorf("resolving symlink %s in build context %s: %w", rel, l.root, err)
	}
	return resolved, fi, nil
}

func within(root, p string) bool {
	r, err := filepath.Rel(root, p)
	return err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) && !filepath.IsAbs(r)
}

func newEntry(rel, abs, source string, fi fs.FileInfo) (Entry, error) {
	id, _ := identityOf(fi)
	e := Entry{Path: rel, Perm: fi.Mode().Perm(), Size: fi.Size(), ID: id, source: source}
	switch {
	case fi.Mode().IsRegular():
		e.Kind = KindFile
	case fi.IsDir():
		e.Kind = KindDir
	default:
		e.Kind = KindSymlink
		target, err := os.Readlink(abs)
		if err != nil {
			return Entry{}, fmt.Errorf("reading symlink %s: %w", rel, err)
		}
		e.LinkTarget = filepath.ToSlash(target)
	}
	return e, nil
}

func specialKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}
