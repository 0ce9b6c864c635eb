// Package dockerfile converts a Dockerfile into the build steps of an E2B
// template: a base image, RUN/COPY/ENV/WORKDIR/USER steps (package steps),
// and the start and ready commands. It follows the E2B SDK's
// fromDockerfile conversion, with Docker's own parser, and rejects what a
// template cannot express (more than one stage, instructions without an E2B
// equivalent) with the line at fault instead of dropping it silently.
package dockerfile

import (
	"bufio"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
)

// Defaults the conversion applies, as the E2B SDK does.
const (
	// DefaultUser and DefaultWorkdir are set at the end when the Dockerfile
	// sets no USER or WORKDIR, so sandboxes do not run as root in "/".
	DefaultUser    = "user"
	DefaultWorkdir = "/home/user"
	// ReadyCmdAfterStart is the ready command used with a CMD/ENTRYPOINT:
	// the Dockerfile has no way to say when the started process is ready.
	ReadyCmdAfterStart = "sleep 20"
)

// Template is the result of a conversion.
type Template struct {
	// FromImage is the base image of the single FROM.
	FromImage string
	// Steps are in the E2B wire layout (package steps).
	Steps []steps.Step
	// Lines are the Dockerfile lines of Steps, one each (0 for a step the
	// conversion adds, such as the final USER and WORKDIR), so that a problem
	// found later with a step, such as a COPY source missing from the
	// context, names its line as conversion errors do.
	Lines []int
	// StartCmd is the command CMD/ENTRYPOINT start in every sandbox; empty
	// when the Dockerfile has neither. ReadyCmd is then ReadyCmdAfterStart.
	StartCmd string
	ReadyCmd string
	// Warnings are things ignored on the way (LABEL, RUN --mount, ...),
	// each naming its line.
	Warnings []string
}

// MaxLineBytes is the longest Dockerfile line the buildkit parser reads (its
// bufio.Scanner's limit, the line ending included); a backslash at the end of a line
// continues an instruction on the next one.
const MaxLineBytes = bufio.MaxScanTokenSize - 1

// LineError is a conversion error at one line of the Dockerfile (1-based;
// 0 when the error concerns the whole file).
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string {
	if e.Line == 0 {
		return "Dockerfile: " + e.Err.Error()
	}
	return fmt.Sprintf("Dockerfile line %d: %v", e.Line, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// UnusedBuildArgsError names the build arguments no ARG of the Dockerfile declares.
// Docker only warns about them; here a misspelt name is an error, since the build it
// would make is not the one asked for.
type UnusedBuildArgsError struct{ Names []string }

func (e *UnusedBuildArgsError) Error() string {
	return fmt.Sprintf("no ARG of the Dockerfile declares %s", strings.Join(e.Names, ", "))
}

// Convert converts the content of a Dockerfile. buildArgs set the values of its ARGs as
// docker build --build-arg does, over their defaults; a name no ARG declares is an
// *UnusedBuildArgsError.
func Convert(content string, buildArgs map[string]string) (*Template, error) {
	// The parser reads lines with a bufio.Scanner, whose token limit makes a longer line
	// fail with the number of a line before it: refused here with its own number.
	for n, line := range strings.Split(content, "\n") {
		if len(line) > MaxLineBytes {
			return nil, &LineError{Line: n + 1, Err: fmt.Errorf("the line is %d bytes long, more than the limit of %d; "+
				"split it with a backslash at the end of each part, or move a long script into a file that COPY adds", len(line), MaxLineBytes)}
		}
	}
	parsed, err := parser.Parse(strings.NewReader(content))
	if err != nil {
		return nil, &LineError{Line: errorLine(err), Err: err}
	}
	c := converter{
		t:         &Template{},
		escape:    parsed.EscapeToken,
		lex:       shell.NewLex(parsed.EscapeToken),
		buildArgs: buildArgs,
		declared:  map[string]bool{},
	}
	// Quotes and escapes are removed, but variables are kept as written:
	// the E2B builder expands them itself, in order, as the build goes.
	c.lex.SkipUnsetEnv = true
	for _, w := range parsed.Warnings {
		line := 0
		if w.Location != nil {
			line = w.Location.Start.Line
		}
		c.warn(line, "%s", w.Short)
	}
	for _, node := range parsed.AST.Children {
		c.line = node.StartLine
		if err := c.instruction(node); err != nil {
			var le *LineError
			if errors.As(err, &le) {
				return nil, err
			}
			return nil, &LineError{Line: node.StartLine, Err: err}
		}
	}
	c.line = 0
	return c.finish()
}

type converter struct {
	t      *Template
	escape rune
	lex    *shell.Lex

	fromLine int
	// line is the line of the instruction being converted; 0 after the last.
	line        int
	metaArgs    map[string]string // ARGs before FROM, for FROM and re-declaration
	buildArgs   map[string]string // values given to ARGs from outside
	declared    map[string]bool   // names of the ARGs seen
	userSet     bool
	workdirSet  bool
	cmd         *instructions.ShellDependantCmdLine
	entrypoint  *instructions.ShellDependantCmdLine
	startedFrom int // line of the CMD/ENTRYPOINT, for errors
}

func (c *converter) warn(line int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if line > 0 {
		msg = fmt.Sprintf("line %d: %s", line, msg)
	}
	c.t.Warnings = append(c.t.Warnings, msg)
}

func (c *converter) step(s steps.Step) {
	c.t.Steps = append(c.t.Steps, s)
	c.t.Lines = append(c.t.Lines, c.line)
}

func (c *converter) instruction(node *parser.Node) error {
	parsed, err := instructions.ParseInstruction(node)
	if err != nil {
		return err
	}
	line := node.StartLine
	name := strings.ToUpper(node.Value)

	if stage, ok := parsed.(*instructions.Stage); ok {
		return c.from(line, stage)
	}
	if arg, ok := parsed.(*instructions.ArgCommand); ok && c.fromLine == 0 {
		return c.metaArg(arg)
	}
	if c.fromLine == 0 {
		return fmt.Errorf("%s before FROM: only ARG may come before FROM", name)
	}

	switch cmd := parsed.(type) {
	case *instructions.RunCommand:
		return c.run(line, cmd)
	case *instructions.CopyCommand:
		if cmd.From != "" {
			return fmt.Errorf("COPY --from=%s: a template has one stage and cannot copy from another image or stage; "+
				"put the files in the build context and COPY them from there", cmd.From)
		}
		if cmd.Parents {
			return errors.New("COPY --parents is not supported: copy each directory with a COPY of its own")
		}
		return c.copy("COPY", cmd.SourcesAndDest, cmd.Chown, cmd.Chmod, cmd.ExcludePatterns)
	case *instructions.AddCommand:
		if cmd.Checksum != "" || cmd.KeepGitDir != nil || cmd.Unpack != nil {
			return errors.New("ADD --checksum, --keep-git-dir and --unpack are not supported; ADD copies local files only (check or unpack them in a RUN step)")
		}
		for _, src := range cmd.SourcePaths {
			if isRemote(src) {
				return fmt.Errorf("ADD %s: sources from URLs or git are not supported; download them in a RUN step", src)
			}
			if isArchiveName(src) {
				c.warn(line, "ADD %s copies the archive as a file; the E2B builder does not unpack archives like Docker does", src)
			}
		}
		return c.copy("ADD", cmd.SourcesAndDest, cmd.Chown, cmd.Chmod, cmd.ExcludePatterns)
	case *instructions.WorkdirCommand:
		c.workdirSet = true
		c.step(steps.NewWorkdir(cmd.Path))
	case *instructions.UserCommand:
		c.userSet = true
		c.step(steps.NewUser(cmd.User))
	case *instructions.EnvCommand:
		vars := make([]steps.EnvVar, 0, len(cmd.Env))
		for _, kv := range cmd.Env {
			v, err := c.unquote(kv.Value)
			if err != nil {
				return fmt.Errorf("ENV %s: %v", kv.Key, err)
			}
			vars = append(vars, steps.EnvVar{Key: kv.Key, Value: v})
		}
		c.step(steps.NewEnv(vars...))
	case *instructions.ArgCommand:
		vars := make([]steps.EnvVar, 0, len(cmd.Args))
		for _, kv := range cmd.Args {
			v := c.metaArgs[kv.Key] // a re-declared meta ARG keeps its value, as in Docker
			if kv.Value != nil {
				if v, err = c.unquote(*kv.Value); err != nil {
					return fmt.Errorf("ARG %s: %v", kv.Key, err)
				}
			}
			vars = append(vars, steps.EnvVar{Key: kv.Key, Value: c.argValue(kv.Key, v)})
		}
		c.step(steps.NewEnv(vars...))
	case *instructions.CmdCommand:
		c.cmd = &cmd.ShellDependantCmdLine
		c.startedFrom = line
	case *instructions.EntrypointCommand:
		c.entrypoint = &cmd.ShellDependantCmdLine
		c.startedFrom = line
	case *instructions.ExposeCommand, *instructions.VolumeCommand:
		// Sandboxes expose every port, and their disk is their own.
	case *instructions.LabelCommand, *instructions.MaintainerCommand:
		c.warn(line, "%s is image metadata a template does not keep; ignored", name)
	default:
		if instead, ok := insteadOf[name]; ok {
			return fmt.Errorf("%s is not supported in an E2B template: %s", name, instead)
		}
		return fmt.Errorf("%s is not an instruction an E2B template can express: remove it, or do its work in a RUN step", name)
	}
	return nil
}

// insteadOf says, for each instruction that changes how an image behaves in a
// way a template cannot reproduce, what to use instead.
var insteadOf = map[string]string{
	"HEALTHCHECK": "say when a sandbox is ready with the build's ready command instead " +
		"(ready_cmd, e.g. provider::e2b::wait_for_url or wait_for_port)",
	"ONBUILD": "a template is no base for later Dockerfiles; put those instructions in the Dockerfile that needs them",
	"SHELL":   "RUN commands run with bash -c (sh -c without bash); call another shell inside the command, e.g. RUN zsh -c '...'",
	"STOPSIGNAL": "E2B stops a sandbox as a whole, not with a signal the image chooses; " +
		"let the start command clean up on SIGTERM if it must",
}

func (c *converter) metaArg(arg *instructions.ArgCommand) error {
	if c.metaArgs == nil {
		c.metaArgs = map[string]string{}
	}
	for _, kv := range arg.Args {
		v := ""
		if kv.Value != nil {
			var err error
			if v, err = c.unquote(*kv.Value); err != nil {
				return fmt.Errorf("ARG %s: %v", kv.Key, err)
			}
		}
		c.metaArgs[kv.Key] = c.argValue(kv.Key, v)
	}
	return nil
}

// argValue is the value of the ARG name declared with value v: the build argument of
// that name when there is one.
func (c *converter) argValue(name, v string) string {
	c.declared[name] = true
	if b, ok := c.buildArgs[name]; ok {
		return b
	}
	return v
}

func (c *converter) from(line int, stage *instructions.Stage) error {
	if c.fromLine != 0 {
		return fmt.Errorf("second FROM (the first is at line %d): multi-stage Dockerfiles are not supported, a template has one base image; "+
			"build the earlier stages into an image to start from, or put their output in the build context", c.fromLine)
	}
	c.fromLine = line
	// FROM expands the ARGs declared before it, as Docker does.
	image, _, err := shell.NewLex(c.escape).ProcessWord(stage.BaseName, metaEnv(c.metaArgs))
	if err != nil {
		return fmt.Errorf("FROM %s: %v", stage.BaseName, err)
	}
	switch {
	case image == "":
		return fmt.Errorf("FROM %s names no image", stage.BaseName)
	case strings.EqualFold(image, "scratch"):
		return errors.New("FROM scratch is not supported: a template needs a base image with a shell")
	}
	if stage.Platform != "" {
		c.warn(line, "FROM --platform=%s ignored; the E2B builder picks the platform", stage.Platform)
	}
	c.t.FromImage = image
	// Docker's defaults, made explicit: the builder's own default is "user".
	c.step(steps.NewUser("root"))
	c.step(steps.NewWorkdir("/"))
	return nil
}

func (c *converter) run(line int, cmd *instructions.RunCommand) error {
	// The fields of --mount are only read on expansion; words stay as written.
	if err := cmd.Expand(func(word string) (string, error) { return word, nil }); err != nil {
		return err
	}
	for _, m := range instructions.GetMounts(cmd) {
		if m.Type == instructions.MountTypeSecret || m.Type == instructions.MountTypeSSH {
			// Dropping the mount would run the command without what it needs; E2B
			// builds have no build secrets, and a secret a step reads stays in the
			// template's snapshot.
			return fmt.Errorf("RUN --mount=type=%s is not supported: an E2B build has no build secrets or SSH agent, "+
				"and what a step reads stays in the template; give the secret to the sandbox when it runs instead", m.Type)
		}
	}
	for _, flag := range cmd.FlagsUsed {
		c.warn(line, "RUN --%s ignored", flag)
	}
	command, err := runCommand(cmd.ShellDependantCmdLine)
	if err != nil {
		return err
	}
	c.step(steps.NewRun(steps.RunArgs{Command: command}))
	return nil
}

// runCommand gives the shell command of a RUN, as Docker would run it: the
// text of the shell form, the exec form's words quoted for the shell, and
// here-documents as the shell runs them.
func runCommand(cmd instructions.ShellDependantCmdLine) (string, error) {
	if !cmd.PrependShell {
		return shellJoin(cmd.CmdLine), nil
	}
	if len(cmd.CmdLine) != 1 {
		return "", fmt.Errorf("cannot read the RUN command %q", cmd.CmdLine)
	}
	text := cmd.CmdLine[0]
	if len(cmd.Files) == 0 {
		return text, nil
	}
	if heredoc := parser.MustParseHeredoc(text); heredoc != nil {
		// "RUN <<EOF": the document is the script.
		data := cmd.Files[0].Data
		if cmd.Files[0].Chomp {
			data = parser.ChompHeredocContent(data)
		}
		if first, rest, ok := strings.Cut(data, "\n"); ok && strings.HasPrefix(first, "#!") {
			// Docker runs such a document as an executable file; here its
			// interpreter reads it from standard input instead.
			interpreter := strings.TrimSpace(strings.TrimPrefix(first, "#!"))
			name := cmd.Files[0].Name
			return fmt.Sprintf("%s <<'%s'\n%s%s", interpreter, name, rest, name), nil
		}
		return data, nil
	}
	// "RUN cat <<EOF > file": the shell reads the documents itself.
	var b strings.Builder
	b.WriteString(text)
	for _, f := range cmd.Files {
		b.WriteString("\n" + f.Data + f.Name)
	}
	return b.String(), nil
}

func (c *converter) copy(name string, sd instructions.SourcesAndDest, chown, chmod string, excludes []string) error {
	if len(sd.SourceContents) > 0 {
		return fmt.Errorf("%s from a here-document is not supported; write the file in a RUN step", name)
	}
	if len(excludes) > 0 {
		return fmt.Errorf("%s --exclude is not supported; use .dockerignore", name)
	}
	mode := ""
	if chmod != "" {
		m, err := strconv.ParseUint(chmod, 8, 32)
		if err != nil || m > 0o7777 {
			return fmt.Errorf("%s --chmod=%s: only octal modes such as 0755 are supported", name, chmod)
		}
		mode = fmt.Sprintf("%04o", m)
	}
	for _, src := range sd.SourcePaths {
		c.step(steps.NewCopy(steps.CopyArgs{Src: src, Dest: sd.DestPath, User: chown, Mode: mode}))
	}
	return nil
}

func (c *converter) unquote(word string) (string, error) {
	s, _, err := c.lex.ProcessWord(word, metaEnv(nil))
	return s, err
}

// finish sets the start command and the default USER and WORKDIR.
func (c *converter) finish() (*Template, error) {
	if c.fromLine == 0 {
		return nil, &LineError{Err: errors.New("no FROM instruction: a template starts from FROM <image> (only ARG may come before it)")}
	}
	var unused []string
	for name := range c.buildArgs {
		if !c.declared[name] {
			unused = append(unused, name)
		}
	}
	if len(unused) > 0 {
		sort.Strings(unused)
		return nil, &UnusedBuildArgsError{Names: unused}
	}
	start := startCommand(c.entrypoint, c.cmd)
	if start != "" {
		c.t.StartCmd = start
		c.t.ReadyCmd = ReadyCmdAfterStart
	} else if c.entrypoint != nil || c.cmd != nil {
		return nil, &LineError{Line: c.startedFrom, Err: errors.New("CMD/ENTRYPOINT gives an empty start command: give the command sandboxes start with, or remove it")}
	}
	if !c.userSet {
		c.step(steps.NewUser(DefaultUser))
	}
	if !c.workdirSet {
		c.step(steps.NewWorkdir(DefaultWorkdir))
	}
	return c.t, nil
}

// startCommand combines ENTRYPOINT and CMD as Docker does: an exec-form
// ENTRYPOINT takes the CMD as its arguments, a shell-form one ignores it.
func startCommand(entrypoint, cmd *instructions.ShellDependantCmdLine) string {
	words := func(c *instructions.ShellDependantCmdLine) []string {
		if c.PrependShell {
			return []string{"/bin/sh", "-c", strings.Join(c.CmdLine, " ")}
		}
		return c.CmdLine
	}
	switch {
	case entrypoint == nil && cmd == nil:
		return ""
	case entrypoint == nil:
		if cmd.PrependShell {
			return strings.Join(cmd.CmdLine, " ")
		}
		return shellJoin(cmd.CmdLine)
	case entrypoint.PrependShell:
		return strings.Join(entrypoint.CmdLine, " ")
	case cmd == nil:
		return shellJoin(entrypoint.CmdLine)
	default:
		return shellJoin(append(append([]string{}, entrypoint.CmdLine...), words(cmd)...))
	}
}

// shellJoin joins exec-form words into one shell command. Plain words are
// joined with spaces, exactly as the E2B SDK does; words the shell would
// split or interpret are single-quoted so the command keeps its meaning.
func shellJoin(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = shellQuote(w)
	}
	return strings.Join(quoted, " ")
}

var plainWord = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

func shellQuote(w string) string {
	if plainWord.MatchString(w) {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

func isRemote(src string) bool {
	lower := strings.ToLower(src)
	for _, prefix := range []string{"http://", "https://", "git@", "git://", "ssh://"} {
		if strings.HasPrefix(lower, prefix) {
			return true
		}
	}
	return false
}

func isArchiveName(src string) bool {
	lower := strings.ToLower(src)
	for _, suffix := range []string{".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar.zst"} {
		if strings.HasSuffix(lower, suffix) {
			return true
		}
	}
	return false
}

// metaEnv gives the lexer variables to expand; all others stay as written.
type metaEnv map[string]string

func (m metaEnv) Get(key string) (string, bool) {
	v, ok := m[key]
	return v, ok
}

func (m metaEnv) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// errorLine is the line buildkit attached to a parse error, or 0.
func errorLine(err error) int {
	var le *parser.LocationError
	if errors.As(err, &le) && len(le.Locations) > 0 && len(le.Locations[0]) > 0 {
		return le.Locations[0][0].Start.Line
	}
	return 0
}
