package buildcontext

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// The limits of a .dockerignore file, which bound the memory its compiled patterns take.
const (
	MaxIgnoreBytes    = 1 << 20
	MaxIgnorePatterns = 10000
)

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
		// Read through a limit: compiled patterns take kilobytes each, so a huge file
		// would take gigabytes of memory.
		lr := &io.LimitedReader{R: f, N: MaxIgnoreBytes + 1}
		patterns, err = ignorefile.ReadAll(lr)
		f.Close()
		switch {
		case err != nil:
			return nil, fmt.Errorf("reading %s: %w", name, err)
		case lr.N <= 0:
			return nil, &contextError{fmt.Sprintf("%s is larger than the limit of %d bytes; a .dockerignore "+
				"that size is not a list of patterns (use directory patterns such as logs/ instead of files)", name, MaxIgnoreBytes), ErrIgnoreLimit}
		case len(patterns) > MaxIgnorePatterns:
			return nil, &contextError{fmt.Sprintf("%s has %d patterns, more than the limit of %d; use directory "+
				"patterns such as logs/ instead of one line a file", name, len(patterns), MaxIgnorePatterns), ErrIgnoreLimit}
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
