package buildcontext

import (
	"path"
	"strings"
)

// segmentGlob matches "/"-separated paths one segment at a time, so a directory walk can
// carry the match state down the tree and stop descending where nothing below can match.
// A segment "**" matches zero or more segments; other segments use path.Match (`*`, `?`,
// `[...]`, `\` escapes), which matches names starting with a dot too.
type segmentGlob struct {
	segs []string
}

// globState is the set of pattern positions reached so far, closed over "**" skips.
type globState []int

func newSegmentGlob(pattern string) (*segmentGlob, error) {
	g := &segmentGlob{}
	if pattern != "" && pattern != "." {
		g.segs = strings.Split(pattern, "/")
	}
	for _, s := range g.segs {
		if _, err := path.Match(s, ""); err != nil {
			return nil, err
		}
	}
	return g, nil
}

func hasGlobMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// start is the state before any segment has been consumed.
func (g *segmentGlob) start() globState { return g.closure(globState{0}) }

func (g *segmentGlob) closure(s globState) globState {
	for i := 0; i < len(s); i++ {
		j := s[i]
		if j < len(g.segs) && g.segs[j] == "**" && !s.has(j+1) {
			s = append(s, j+1)
		}
	}
	return s
}

func (s globState) has(j int) bool {
	for _, k := range s {
		if k == j {
			return true
		}
	}
	return false
}

// step consumes one path segment.
func (g *segmentGlob) step(s globState, name string) globState {
	var next globState
	for _, j := range s {
		if j >= len(g.segs) {
			continue
		}
		if g.segs[j] == "**" {
			if !next.has(j) {
				next = append(next, j)
			}
			continue
		}
		if ok, _ := path.Match(g.segs[j], name); ok && !next.has(j+1) {
			next = append(next, j+1)
		}
	}
	return g.closure(next)
}

// matched reports whether the segments consumed so far match the whole pattern.
func (g *segmentGlob) matched(s globState) bool { return s.has(len(g.segs)) }

// alive reports whether some longer path could still match.
func (g *segmentGlob) alive(s globState) bool {
	for _, j := range s {
		if j < len(g.segs) {
			return true
		}
	}
	return false
}

// literalPrefix splits off the leading segments that contain no glob syntax.
func (g *segmentGlob) literalPrefix() (prefix []string, rest *segmentGlob) {
	n := 0
	for n < len(g.segs) && !hasGlobMeta(g.segs[n]) {
		n++
	}
	return g.segs[:n], &segmentGlob{segs: g.segs[n:]}
}
