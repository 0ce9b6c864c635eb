package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestDocLinks checks every relative link of the repository's Markdown: the file or
// directory it names exists, and an #anchor names a heading (or an explicit
// <a id>/<a name>) of the page, by GitHub's rules. Templates (templates/) are checked
// where tfplugindocs writes them, under docs/. Links to other sites are not followed.
func TestDocLinks(t *testing.T) {
	var pages []string
	for _, root := range []string{"README.md", "CONTRIBUTING.md", "DESIGN.md", "CHANGELOG.md", "docs", "design", "examples", "templates"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			name := d.Name()
			switch {
			case d.IsDir():
			case strings.HasPrefix(p, "examples"+string(filepath.Separator)) && name != "README.md":
			case strings.HasSuffix(name, ".md"), strings.HasSuffix(name, ".md.tmpl"):
				pages = append(pages, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	anchors := map[string]map[string]bool{} // page → its anchors
	anchorsOf := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		a, err := pageAnchors(page)
		if err != nil {
			t.Errorf("%v", err)
		}
		anchors[page] = a
		return a
	}
	for _, page := range pages {
		links, err := pageLinks(page)
		if err != nil {
			t.Fatal(err)
		}
		// A template is read where it is generated: templates/x.md.tmpl is docs/x.md.
		at := page
		if rel, ok := strings.CutPrefix(filepath.ToSlash(page), "templates/"); ok {
			at = filepath.Join("docs", strings.TrimSuffix(rel, ".tmpl"))
		}
		for _, l := range links {
			target, anchor, _ := strings.Cut(l.target, "#")
			resolved := at
			if target != "" {
				resolved = filepath.Join(filepath.Dir(at), filepath.FromSlash(target))
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", page, l.line, l.target, resolved)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(resolved, ".md") && !anchorsOf(resolved)[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", page, l.line, l.target, resolved, anchor)
			}
		}
	}
}

type docLink struct {
	line   int
	target string
}

var (
	// inlineLink is [text](target) and ![alt](target), with an optional "title".
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// referenceLink is a definition [label]: target.
	referenceLink = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+.*)?$`)
	codeSpan      = regexp.MustCompile("`[^`]*`")
	externalLink  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	explicitID    = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
)

// pageLinks are the relative links of a Markdown page, outside code.
func pageLinks(page string) ([]docLink, error) {
	var links []docLink
	err := eachProseLine(page, func(n int, line string) {
		line = codeSpan.ReplaceAllString(line, "")
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := referenceLink.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if !externalLink.MatchString(target) && !strings.HasPrefix(target, "{{") {
				links = append(links, docLink{n, target})
			}
		}
	})
	return links, err
}

// pageAnchors are the anchors GitHub gives a page: one per heading (lower case, only
// letters, digits, '-', '_' and spaces kept, spaces as '-', repeats numbered -1, -2…),
// and the ids of <a id> and <a name> tags.
func pageAnchors(page string) (map[string]bool, error) {
	anchors := map[string]bool{}
	seen := map[string]int{}
	err := eachProseLine(page, func(_ int, line string) {
		for _, m := range explicitID.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		trimmed := strings.TrimLeft(line, " ")
		if len(line)-len(trimmed) > 3 || !strings.HasPrefix(trimmed, "#") {
			return
		}
		text := strings.TrimLeft(trimmed, "#")
		if level := len(trimmed) - len(text); level > 6 || (text != "" && text[0] != ' ') {
			return
		}
		slug := headingSlug(strings.TrimRight(strings.TrimSpace(text), "#"))
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	})
	return anchors, err
}

// headingSlug is GitHub's anchor of a heading's text.
func headingSlug(text string) string {
	text = codeSpan.ReplaceAllStringFunc(text, func(s string) string { return strings.Trim(s, "`") })
	text = inlineLink.ReplaceAllStringFunc(text, func(s string) string {
		return s[strings.Index(s, "[")+1 : strings.Index(s, "]")]
	})
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// eachProseLine calls f with each line of page outside fenced code blocks and the
// front matter.
func eachProseLine(page string, f func(n int, line string)) error {
	file, err := os.Open(page)
	if err != nil {
		return err
	}
	defer file.Close()
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	fence, frontMatter := "", false
	for n := 1; scanner.Scan(); n++ {
		line := scanner.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case n == 1 && trimmed == "---":
			frontMatter = true
		case frontMatter:
			frontMatter = trimmed != "---"
		case fence != "":
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
			}
		case strings.HasPrefix(trimmed, "```"), strings.HasPrefix(trimmed, "~~~"):
			fence = trimmed[:3]
		default:
			f(n, line)
		}
	}
	return scanner.Err()
}
