package buildcontext

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/moby/patternmatcher"
)

// ListOptions tunes Walk.
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

// Walk calls fn with each entry the COPY source src takes from contextDir, following
// design/hashing.md "Listing": src is relative and stays inside the context; .dockerignore and
// opts.IgnorePatterns exclude entries with Docker's semantics; src may be a glob (`*`, `?`,
// `[...]`, `**`; dotfiles match); a matched directory brings itself and everything below
// it; symlinks are never followed (see ListOptions.ResolveLinks); sockets, FIFOs and
// devices are errors unless ignored; an empty result is an error. Entries come in path
// order (as bytes), without being held: memory depends on the depth of the tree and the
// size of its directories, not on the number of entries. fn must not keep the *Entry.
// Walk returns the context's absolute path (symlinks resolved) or the first error, fn's
// or its own.
func Walk(contextDir, src string, opts ListOptions, fn func(*Entry) error) (string, error) {
	pattern, err := CleanSource(contextDir, src)
	if err != nil {
		return "", err
	}
	root, err := contextRoot(contextDir)
	if err != nil {
		return "", err
	}
	glob, err := newSegmentGlob(pattern)
	if err != nil {
		return "", &contextError{fmt.Sprintf("COPY source %q is not a valid pattern: %v", src, err), ErrInvalidSrc}
	}
	ign, err := loadIgnore(root, opts.IgnorePatterns)
	if err != nil {
		return "", err
	}
	emitted := 0
	l := &lister{root: root, ignore: ign, resolve: opts.ResolveLinks, onPath: map[[2]uint64]bool{}, ahead: newReadAhead(),
		emit: func(e *Entry) error { emitted++; return fn(e) }}
	prefix, rest := glob.literalPrefix()
	l.glob = rest
	err = l.walkFromPrefix(prefix)
	l.ahead.stop()
	if err != nil {
		return "", err
	}
	if emitted == 0 {
		return "", &contextError{fmt.Sprintf("no files match %s in %s", src, root), ErrNoMatch}
	}
	return root, nil
}

// CheckRelative checks what can be told of the COPY source src without a
// context: it is not empty and not absolute. CleanSource checks the rest.
func CheckRelative(src string) error {
	if src == "" {
		return &contextError{"COPY source is empty", ErrInvalidSrc}
	}
	if path.IsAbs(src) || filepath.IsAbs(src) {
		return &contextError{fmt.Sprintf("COPY source %q is absolute; it must be relative to the build context", src), ErrInvalidSrc}
	}
	return nil
}

// CleanSource checks the COPY source src before anything is read (relative,
// and inside the context once cleaned: "a/../b" is "b", "../x" leaves it)
// and returns it cleaned, "/"-separated. Errors name the context directory
// contextDir; "" for a context that is not one here (a server's uploaded
// archive).
func CleanSource(contextDir, src string) (string, error) {
	if err := CheckRelative(src); err != nil {
		return "", err
	}
	cleaned := path.Clean(src)
	if cleaned == ".." || strings.HasPrefix(cleaned, "../") {
		if contextDir == "" {
			return "", &contextError{fmt.Sprintf("COPY source %q escapes the build context", src), ErrInvalidSrc}
		}
		return "", &contextError{fmt.Sprintf("COPY source %q escapes the context directory %s: sources are paths inside it; "+
			"move the file into it, or use a context directory that holds both", src, contextDir), ErrInvalidSrc}
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

type lister struct {
	root    string
	ignore  *ignoreRules
	glob    *segmentGlob
	resolve bool
	emit    func(*Entry) error
	// onPath holds the (device, inode) of the directories being walked, to stop a
	// resolved symlink from looping.
	onPath map[[2]uint64]bool
	free   []walkBuffers // see buffers
	ahead  *readAhead
}

// node is one path the walk reached and keeps: its own entry, if it is listed, and for a
// directory the walk enters, what it needs to walk the contents.
type node struct {
	rel, abs string // abs is "" for a regular file (see visit)
	entry    Entry
	listed   bool // entry is listed (or pending)
	// pending says entry is an excluded directory, listed only if something below it is
	// (an exception re-includes it), as BuildKit sends its parent.
	pending    bool
	descend    bool
	dir        string // what to read for the contents: abs, or what a resolved link points to
	st         childStat
	ignoreInfo patternmatcher.MatchInfo
	gs         globState
	matched    bool
	scan       *pendingScan
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
	n, ok, err := l.visit(rel, abs, statOf(fi), info, l.glob.start(), false)
	if err != nil || !ok {
		return err
	}
	if rel == "." {
		// The context's own entry sorts among its children's paths, which have no prefix.
		var self *Entry
		if n.listed {
			self = &n.entry
		}
		return l.walkDir(&n, self)
	}
	if err := l.emitSelf(&n); err != nil || !n.descend {
		return err
	}
	return l.walkDir(&n, nil)
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

// visit decides what the walk does with rel (lstat'ed as st): false when it lists
// nothing there. abs is its path, which only directories and symlinks need ("" for a regular
// file, whose path is the context joined with rel). gs is the glob state after rel's own
// name; inMatch says an ancestor already matched src.
func (l *lister) visit(rel, abs string, st childStat, parentIgnore patternmatcher.MatchInfo, gs globState, inMatch bool) (node, bool, error) {
	excluded, ignoreInfo, err := l.ignore.excluded(rel, parentIgnore)
	if err != nil {
		return node{}, false, err
	}
	matched := inMatch || l.glob.matched(gs)
	if !matched && !st.mode.IsDir() {
		return node{}, false, nil
	}
	var resolved string // what a resolved symlink points to
	if st.mode&fs.ModeSymlink != 0 && l.resolve && !excluded {
		target, rfi, err := l.resolveLink(rel, abs)
		if err != nil {
			return node{}, false, err
		}
		if rfi != nil {
			resolved, st = target, statOf(rfi)
		}
	}
	mode := st.mode
	switch {
	case mode.IsRegular(), mode&fs.ModeSymlink != 0:
		if excluded || !matched {
			return node{}, false, nil
		}
		e, err := newEntry(rel, abs, resolved, st)
		if err != nil {
			return node{}, false, err
		}
		return node{rel: rel, entry: e, listed: true}, true, nil
	case mode.IsDir():
		if !l.walksInto(rel, gs, matched, excluded) {
			return node{}, false, nil
		}
		n := node{rel: rel, abs: abs, descend: true, dir: cmp.Or(resolved, abs), st: st, ignoreInfo: ignoreInfo, gs: gs, matched: matched}
		if matched {
			e, err := newEntry(rel, abs, resolved, st)
			if err != nil {
				return node{}, false, err
			}
			n.entry, n.listed, n.pending = e, true, excluded
		}
		return n, true, nil
	default:
		if excluded || !matched {
			return node{}, false, nil
		}
		return node{}, false, &contextError{fmt.Sprintf("%s in build context %s is a %s, which cannot be copied; add it to .dockerignore", rel, l.root, specialKind(mode)), ErrSpecialFile}
	}
}

// walksInto reports whether the walk descends into the directory rel, given whether it
// matched src and whether it is ignored.
func (l *lister) walksInto(rel string, gs globState, matched, excluded bool) bool {
	if !matched && !l.glob.alive(gs) {
		return false
	}
	return !excluded || l.ignore.mayReinclude(rel)
}

// emitSelf lists n's own entry. A pending one is listed only if its contents list
// something, which a walk of them that stops at the first entry finds out; otherwise
// there is nothing to walk. That walks an excluded directory twice, which only happens
// where an exception may re-include something below it.
func (l *lister) emitSelf(n *node) error {
	if !n.listed {
		return nil
	}
	if n.pending {
		emit := l.emit
		l.emit = func(*Entry) error { return errFound }
		err := l.walkDir(n, nil)
		l.emit = emit
		if !errors.Is(err, errFound) {
			n.descend = false
			return err
		}
	}
	return l.emit(&n.entry)
}

// errFound stops the walk of emitSelf at the first entry.
var errFound = errors.New("found an entry")

// walkKey is one place in a directory's walk order: a child's own entry (at its name) or
// a child directory's contents (at its name followed by "/"). This order, and neither
// names alone nor directories at name + "/", is the order of full paths as bytes: a
// sibling whose name extends a directory's by a byte below "/" ("a-" beside "a") comes
// after "a" and before "a/x". child -1 is the context's own entry, at ".".
type walkKey struct {
	child    int
	contents bool
}

// compareKeys orders name a (followed by "/" if aContents) against b likewise, as bytes.
func compareKeys(a string, aContents bool, b string, bContents bool) int {
	n := min(len(a), len(b))
	if c := strings.Compare(a[:n], b[:n]); c != 0 {
		return c
	}
	for k := n; ; k++ {
		x, y := keyByte(a, aContents, k), keyByte(b, bContents, k)
		if x != y || x < 0 {
			return cmp.Compare(x, y)
		}
	}
}

// keyByte is byte k of name s followed by "/" if contents, or -1 past its end.
func keyByte(s string, contents bool, k int) int {
	switch {
	case k < len(s):
		return int(s[k])
	case k == len(s) && contents:
		return '/'
	}
	return -1
}

// walkDir lists the contents of the directory n in path order, with self (the context's
// own entry, or nil) among them.
func (l *lister) walkDir(n *node, self *Entry) error {
	key := [2]uint64{n.st.id.Dev, n.st.id.Ino}
	if l.onPath[key] {
		return &contextError{fmt.Sprintf("symlink cycle: %s leads back to a directory above it", n.rel), errSymlinkCycle}
	}
	l.onPath[key] = true
	defer delete(l.onPath, key)

	if n.scan == nil {
		n.scan = l.ahead.now(n.dir)
	}
	children := n.scan.result()
	if children.err != nil {
		return fmt.Errorf("reading directory %s in build context %s: %w", n.rel, l.root, children.err)
	}
	childRels := joinRelAll(n.rel, children.names)
	nodes, keys := l.buffers(len(children.names))
	defer l.release(nodes, keys)
	if self != nil {
		keys = append(keys, walkKey{child: -1})
	}
	for i, name := range children.names {
		cst := children.stats[i]
		if cst.err != nil {
			if errors.Is(cst.err, fs.ErrNotExist) {
				continue // removed since the directory was read
			}
			return fmt.Errorf("reading %s in build context %s: %w", childRels[i], l.root, cst.err)
		}
		var childAbs string
		if !cst.mode.IsRegular() {
			childAbs = joinAbs(n.abs, name)
		}
		gs := n.gs
		if !n.matched {
			gs = l.glob.step(n.gs, name)
		}
		c, ok, err := l.visit(childRels[i], childAbs, cst, n.ignoreInfo, gs, n.matched)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		nodes[i] = c
		if c.listed {
			keys = append(keys, walkKey{child: i})
		}
		if c.descend {
			keys = append(keys, walkKey{child: i, contents: true})
		}
	}
	name := func(k walkKey) string {
		if k.child < 0 {
			return "."
		}
		return children.names[k.child]
	}
	// Names are sorted, so keys are out of order only around names that extend others.
	slices.SortFunc(keys, func(a, b walkKey) int { return compareKeys(name(a), a.contents, name(b), b.contents) })

	// Read ahead the subdirectories the walk will enter, so other cores stat them while
	// this one builds the entries: readAheadWindow of them at first, then one more each
	// time the walk reaches one, which bounds the goroutines and scans waiting.
	var toRead []*node // in walk order
	for _, k := range keys {
		if k.contents {
			toRead = append(toRead, &nodes[k.child])
		}
	}
	readNext := func() {
		if len(toRead) > 0 {
			c := toRead[0]
			toRead = toRead[1:]
			if c.scan == nil { // not read yet by emitSelf
				c.scan = l.ahead.start(c.dir)
			}
		}
	}
	for range readAheadWindow {
		readNext()
	}
	for _, k := range keys {
		var err error
		switch {
		case k.child < 0:
			err = l.emit(self)
		case !k.contents:
			err = l.emitSelf(&nodes[k.child])
		default:
			readNext()
			if c := &nodes[k.child]; c.descend {
				err = l.walkDir(c, nil)
				c.scan = nil // done with: the siblings still to walk must not hold it
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// walkBuffers are the nodes and keys of one directory's walk, kept for the next
// directory walked: a walk of a million files would otherwise allocate (and collect)
// about 500 MB of them.
type walkBuffers struct {
	nodes []node
	keys  []walkKey
}

// buffers are empty nodes and keys for a directory of n children, from those a finished
// walk released: the walks in progress are nested, so the last released fit next.
func (l *lister) buffers(n int) ([]node, []walkKey) {
	var b walkBuffers
	if last := len(l.free) - 1; last >= 0 {
		b, l.free = l.free[last], l.free[:last]
	}
	if cap(b.nodes) < n {
		b.nodes = make([]node, n)
	}
	if cap(b.keys) < n+1 {
		b.keys = make([]walkKey, 0, n+1)
	}
	return b.nodes[:n], b.keys[:0]
}

// release returns a finished walk's buffers, cleared so they hold no entries.
func (l *lister) release(nodes []node, keys []walkKey) {
	clear(nodes)
	l.free = append(l.free, walkBuffers{nodes, keys})
}

// joinRelAll is joinRel(dir, name) for each of names, all in one allocation: a listing
// builds a path for every entry.
func joinRelAll(dir string, names []string) []string {
	prefix := ""
	if dir != "." {
		prefix = dir + "/"
	}
	size := 0
	for _, name := range names {
		size += len(prefix) + len(name)
	}
	var text strings.Builder
	text.Grow(size)
	for _, name := range names {
		text.WriteString(prefix)
		text.WriteString(name)
	}
	all := text.String()
	paths := make([]string, len(names))
	for i, name := range names {
		n := len(prefix) + len(name)
		paths[i], all = all[:n], all[n:]
	}
	return paths
}

// joinAbs is filepath.Join(dir, name) for a clean dir and a plain name, without Clean's
// scan of the whole path.
func joinAbs(dir, name string) string {
	if strings.HasSuffix(dir, string(filepath.Separator)) {
		return dir + name
	}
	return dir + string(filepath.Separator) + name
}
