// Package steps is the vocabulary of template build steps, in the layout the
// E2B build API takes them: the step types, how their arguments are laid
// out, and the other names a server accepts for some of them. The Dockerfile
// converter produces these steps, the provider writes them from the
// configuration, the API client sends them and the local server runs them.
// It imports nothing of this module.
package steps

// Step types, as the E2B API spells them.
const (
	Run     = "RUN"
	Copy    = "COPY"
	Env     = "ENV"
	Workdir = "WORKDIR"
	User    = "USER"
)

// Types are the step types, in the order the documentation lists them.
var Types = []string{Run, Copy, Env, Workdir, User}

// aliases are the types E2B accepts under another name: a Dockerfile's ADD
// is a COPY, its ARG an ENV.
var aliases = map[string]string{"ADD": Copy, "ARG": Env}

// Step is one template build step, as sent in the steps of
// POST /v2/templates/{templateID}/builds/{buildID}. Args per type:
//
//	RUN     [command] or [command, user]
//	COPY    [src, dest, user, mode]: always four, "" when unset; mode is a
//	        four-digit octal string such as "0755"
//	ENV     [k1, v1, k2, v2, ...]
//	WORKDIR [path]
//	USER    [name]
//
// FilesHash is set on COPY steps: the hash the step's archive is stored
// under.
type Step struct {
	Type      string   `json:"type"`
	Args      []string `json:"args"`
	FilesHash string   `json:"filesHash,omitempty"`
	Force     bool     `json:"force"`
}

// Normalize returns the type typ stands for: itself for one of Types, the
// type an alias names (ADD is COPY, ARG is ENV). known is false for any
// other string, which is returned unchanged. Spelling is exact: E2B's
// types are upper case.
func Normalize(typ string) (normalized string, known bool) {
	if t, ok := aliases[typ]; ok {
		return t, true
	}
	for _, t := range Types {
		if t == typ {
			return t, true
		}
	}
	return typ, false
}
