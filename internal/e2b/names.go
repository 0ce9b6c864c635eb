package e2b

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/google/uuid"
)

// The E2B name grammar (design/e2b-api.md "IDs and name grammar", "Names, aliases, tags"). The
// provider validates names before it calls the API and the local server
// validates them as E2B does, so both use these functions.

// maxNameLength is the longest template name reference E2B accepts.
const maxNameLength = 128

// DefaultTag is the tag a name without one refers to; naming it explicitly is
// the same as naming no tag.
const DefaultTag = "default"

var (
	aliasPattern     = regexp.MustCompile(`^[a-z0-9-_]+$`)
	tagPattern       = regexp.MustCompile(`^[a-z0-9-_.]+$`)
	templateIDShape  = regexp.MustCompile(`^[a-z0-9]{20}$`)
	sandboxIDPattern = regexp.MustCompile(`^[a-z0-9]+$`)
	apiKeyPattern    = regexp.MustCompile(`^e2b_[0-9a-f]+$`)
	filesHashPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Name is a parsed template name reference "[namespace/]alias[:tag]".
// Namespace and Tag are empty when absent; a "default" tag parses as no tag.
type Name struct {
	Namespace string
	Alias     string
	Tag       string
}

// ParseName parses a template name reference the way the E2B server does:
// trim spaces, split once on the first ":" into identifier and tag, split the
// identifier once on "/" into namespace and alias, lower-case, validate.
// The tag position may hold a build UUID (it pins that build when a template
// is resolved for a sandbox); use IsBuildID on Tag to tell, and ValidateTag
// where only real tags are allowed.
func ParseName(s string) (Name, error) {
	trimmed := strings.TrimSpace(s)
	if trimmed == "" {
		return Name{}, fmt.Errorf("template name %q is empty", s)
	}
	if len(trimmed) > maxNameLength {
		return Name{}, fmt.Errorf("template name %q is %d characters long; at most %d are allowed", s, len(trimmed), maxNameLength)
	}
	lower := strings.ToLower(trimmed)
	identifier, tag, hasTag := strings.Cut(lower, ":")
	var n Name
	if hasTag {
		if !tagPattern.MatchString(tag) {
			return Name{}, fmt.Errorf("template name %q has an invalid tag %q: a tag may contain only a-z, 0-9, '-', '_' and '.'", s, tag)
		}
		if tag != DefaultTag {
			n.Tag = tag
		}
	}
	namespace, alias, hasNamespace := strings.Cut(identifier, "/")
	if !hasNamespace {
		alias, namespace = namespace, ""
	} else if !aliasPattern.MatchString(namespace) {
		return Name{}, fmt.Errorf("template name %q has an invalid namespace %q: a namespace may contain only a-z, 0-9, '-' and '_'", s, namespace)
	}
	if !aliasPattern.MatchString(alias) {
		return Name{}, fmt.Errorf("template name %q has an invalid alias %q: an alias may contain only a-z, 0-9, '-' and '_'", s, alias)
	}
	n.Namespace, n.Alias = namespace, alias
	return n, nil
}

// Identifier is the name without its tag: "namespace/alias" or "alias".
func (n Name) Identifier() string {
	if n.Namespace == "" {
		return n.Alias
	}
	return n.Namespace + "/" + n.Alias
}

// String is the canonical form of the reference: Identifier, then ":tag" when
// a tag other than the default is set.
func (n Name) String() string {
	if n.Tag == "" {
		return n.Identifier()
	}
	return n.Identifier() + ":" + n.Tag
}

// NormalizeTag trims and lower-cases tag and validates it as an entry of a
// tag list: the tag grammar, and not a UUID (a UUID in a tag position means a
// build ID, so a tag spelled like one would be ambiguous).
func NormalizeTag(tag string) (string, error) {
	cleaned := strings.ToLower(strings.TrimSpace(tag))
	if !tagPattern.MatchString(cleaned) {
		return "", fmt.Errorf("tag %q is invalid: a tag may contain only a-z, 0-9, '-', '_' and '.'", tag)
	}
	if len(cleaned) > maxNameLength {
		return "", fmt.Errorf("tag %q is %d characters long; at most %d are allowed", tag, len(cleaned), maxNameLength)
	}
	if _, err := uuid.Parse(cleaned); err == nil {
		return "", fmt.Errorf("tag %q is invalid: a tag must not be a UUID (that spelling names a build)", tag)
	}
	return cleaned, nil
}

// ValidateTag reports whether tag is acceptable in a tag list (NormalizeTag).
func ValidateTag(tag string) error {
	_, err := NormalizeTag(tag)
	return err
}

// IsBuildID reports whether s is a build ID: a UUID in its canonical
// 36-character form.
func IsBuildID(s string) bool {
	if len(s) != 36 {
		return false
	}
	_, err := uuid.Parse(s)
	return err == nil
}

// ValidateBuildID returns an error naming s unless it is a build ID.
func ValidateBuildID(s string) error {
	if !IsBuildID(s) {
		return fmt.Errorf("build ID %q is not a UUID", s)
	}
	return nil
}

// IsTemplateID reports whether s has the shape of a template ID: 20
// characters of a-z and 0-9.
func IsTemplateID(s string) bool {
	return templateIDShape.MatchString(s)
}

// ValidateTemplateID returns an error naming s unless it is shaped like a
// template ID.
func ValidateTemplateID(s string) error {
	if !IsTemplateID(s) {
		return fmt.Errorf("%q is not a template ID: E2B gives each template an ID of 20 characters of a-z and 0-9, "+
			"such as \"rki5dems9wqfm4r03t7g\" (e2b_template's id). A name such as \"my-app\" is accepted only where "+
			"the argument says so (data sources, e2b_alias's template)", s)
	}
	return nil
}

// IsAPIKey reports whether s has the API key format the E2B SDK checks: "e2b_"
// and lower-case hex digits. A self-hosted server may hand out keys of its own,
// so callers only warn about other formats.
func IsAPIKey(s string) bool { return apiKeyPattern.MatchString(s) }

// ValidateSandboxID returns an error naming s unless it passes the server's
// sandbox ID check (a-z and 0-9 only; E2B issues "i" + 20 such characters).
func ValidateSandboxID(s string) error {
	if !sandboxIDPattern.MatchString(s) {
		return fmt.Errorf("sandbox ID %q may contain only a-z and 0-9", s)
	}
	return nil
}

// ValidateFilesHash returns an error naming s unless it is a files hash as
// GET /templates/{id}/files/{hash} accepts it: 64 lower-case hex digits.
func ValidateFilesHash(s string) error {
	if !filesHashPattern.MatchString(s) {
		return fmt.Errorf("files hash %q is not 64 lower-case hex digits", s)
	}
	return nil
}
