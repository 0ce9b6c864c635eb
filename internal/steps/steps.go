// Package steps is the vocabulary of template build steps, in the layout the
// E2B build API takes them: the step types, how their arguments are laid
// out, and the other names a server accepts for some of them. The Dockerfile
// converter produces these steps, the provider writes them from the
// configuration, the API client sends them and the local server runs them.
// It imports nothing of this module.
package steps

import (
	"fmt"
	"strings"
)

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
// POST /v2/templates/{templateID}/builds/{buildID}. Args are positional, per
// type:
//
//	RUN     [command] or [command, user]
//	COPY    [src, dest, user, mode]: always four, "" when unset; mode is a
//	        four-digit octal string such as "0755"
//	ENV     [k1, v1, k2, v2, ...]
//	WORKDIR [path]
//	USER    [name], or [name, "true"] to make the user an administrator
//
// That layout is this package's alone: build steps with NewRun, NewCopy,
// NewEnv, NewWorkdir and NewUser, and read them with the accessor of their
// type (RunArgs, CopyArgs, EnvVars, WorkdirPath, UserArgs), which read what
// is missing as "". FilesHash is set on COPY steps: the hash the step's
// archive is stored under.
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

// RunArgs are the arguments of a RUN step; User is empty for the current user.
type RunArgs struct{ Command, User string }

// CopyArgs are the arguments of a COPY step; User and Mode are empty when unset.
type CopyArgs struct{ Src, Dest, User, Mode string }

// EnvVar is one variable an ENV step sets.
type EnvVar struct{ Key, Value string }

// UserArgs are the arguments of a USER step.
type UserArgs struct {
	Name string
	// Admin adds the user to the administrators (sudoers).
	Admin bool
}

// NewRun is the step RUN a.
func NewRun(a RunArgs) Step {
	args := []string{a.Command}
	if a.User != "" {
		args = append(args, a.User)
	}
	return Step{Type: Run, Args: args}
}

// NewCopy is the step COPY a, always with its four arguments.
func NewCopy(a CopyArgs) Step {
	return Step{Type: Copy, Args: []string{a.Src, a.Dest, a.User, a.Mode}}
}

// NewEnv is the step ENV vars, in their order.
func NewEnv(vars ...EnvVar) Step {
	args := make([]string, 0, 2*len(vars))
	for _, v := range vars {
		args = append(args, v.Key, v.Value)
	}
	return Step{Type: Env, Args: args}
}

// NewWorkdir is the step WORKDIR path.
func NewWorkdir(path string) Step { return Step{Type: Workdir, Args: []string{path}} }

// NewUser is the step USER name.
func NewUser(name string) Step { return Step{Type: User, Args: []string{name}} }

// arg is Args[i], "" when there is none.
func (s Step) arg(i int) string {
	if i < len(s.Args) {
		return s.Args[i]
	}
	return ""
}

// RunArgs reads the arguments of a RUN step.
func (s Step) RunArgs() RunArgs { return RunArgs{Command: s.arg(0), User: s.arg(1)} }

// CopyArgs reads the arguments of a COPY step.
func (s Step) CopyArgs() CopyArgs {
	return CopyArgs{Src: s.arg(0), Dest: s.arg(1), User: s.arg(2), Mode: s.arg(3)}
}

// EnvVars reads the variables of an ENV step; its arguments must be pairs.
func (s Step) EnvVars() ([]EnvVar, error) {
	if len(s.Args)%2 != 0 {
		return nil, fmt.Errorf("%s needs key/value pairs, got %d arguments", s.Type, len(s.Args))
	}
	vars := make([]EnvVar, 0, len(s.Args)/2)
	for i := 0; i < len(s.Args); i += 2 {
		vars = append(vars, EnvVar{Key: s.Args[i], Value: s.Args[i+1]})
	}
	return vars, nil
}

// WorkdirPath reads the path of a WORKDIR step.
func (s Step) WorkdirPath() string { return s.arg(0) }

// UserArgs reads the arguments of a USER step.
func (s Step) UserArgs() UserArgs { return UserArgs{Name: s.arg(0), Admin: s.arg(1) == "true"} }

// Describe is the step as a Dockerfile-like line for logs and messages, such as
// "RUN make (as builder)" or "COPY app /app (owner user, mode 0755)".
func (s Step) Describe() string {
	args := s.Args
	var extra []string
	switch s.Type {
	case Run:
		a := s.RunArgs()
		args = []string{a.Command}
		if a.User != "" {
			extra = append(extra, "as "+a.User)
		}
	case Copy:
		a := s.CopyArgs()
		args = []string{a.Src, a.Dest}
		if a.User != "" {
			extra = append(extra, "owner "+a.User)
		}
		if a.Mode != "" {
			extra = append(extra, "mode "+a.Mode)
		}
	case Env:
		args = nil
		for i := 0; i+1 < len(s.Args); i += 2 {
			args = append(args, s.Args[i]+"="+s.Args[i+1])
		}
	}
	line := strings.TrimSpace(s.Type + " " + strings.Join(args, " "))
	if len(extra) > 0 {
		line += " (" + strings.Join(extra, ", ") + ")"
	}
	return line
}
