package build

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
)

// step runs one template step.
func (b *builder) step(ctx context.Context, step string, st e2b.TemplateStep) error {
	switch st.Type {
	case steps.Run:
		run := st.RunArgs()
		if strings.TrimSpace(run.Command) == "" {
			return errors.New("RUN has no command")
		}
		user := b.user
		if run.User != "" {
			user = run.User
		}
		return b.runCommand(ctx, step, run.Command, user, b.workdir)
	case steps.Copy:
		return b.copy(ctx, st)
	case steps.Env:
		vars, err := st.EnvVars()
		if err != nil {
			return err
		}
		for _, v := range vars {
			if err := b.setEnv(ctx, v.Key, v.Value); err != nil {
				return err
			}
		}
		return nil
	case steps.Workdir:
		if st.WorkdirPath() == "" {
			return errors.New("WORKDIR has no path")
		}
		return b.setWorkdir(ctx, st.WorkdirPath())
	case steps.User:
		user := st.UserArgs()
		if user.Name == "" {
			return errors.New("USER has no name")
		}
		return b.setUser(ctx, step, user.Name, user.Admin)
	}
	return fmt.Errorf("command type %s is not implemented", st.Type)
}

// runCommand runs a shell command the way RUN does, streaming its output
// into the log, and fails on a non-zero exit with its last lines.
func (b *builder) runCommand(ctx context.Context, step, command, user, cwd string) error {
	out := newLineLog(func(line string) { b.emit(step, e2b.LogInfo, line) })
	cmd, args := b.sh.Command(command)
	res, err := b.c.Envd().Run(ctx, client.RunRequest{
		Cmd: cmd, Args: args, Env: b.env, Cwd: cwd, User: user,
		MaxOutputBytes: 1, // the log gets everything through OnOutput
		OnOutput:       out.Write,
	})
	out.Flush()
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("command %q exited with code %d%s", command, res.ExitCode, out.tail())
	}
	return nil
}

// root runs a helper script as root with /bin/sh (every image has it) and
// returns its standard output; a failure carries its standard error.
func (b *builder) root(ctx context.Context, what, script string, args ...string) (string, error) {
	res, err := b.c.Envd().Run(ctx, client.RunRequest{
		Cmd:  "/bin/sh",
		Args: append([]string{"-c", script, "e2b"}, args...),
		User: "root",
		Cwd:  "/",
	})
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if res.ExitCode != 0 {
		msg := strings.TrimSpace(string(res.Stderr))
		if msg == "" {
			msg = strings.TrimSpace(string(res.Stdout))
		}
		return "", fmt.Errorf("%s: exit code %d: %s", what, res.ExitCode, msg)
	}
	return string(res.Stdout), nil
}

// setEnv expands value with the shell, as root, in the current
// environment and records it (design/e2b-api.md, "Server-side execution
// semantics"): $VAR works, command substitution
// does not.
func (b *builder) setEnv(ctx context.Context, key, value string) error {
	if key == "" {
		return errors.New("ENV has an empty name")
	}
	cmd, args := b.sh.Command(`printf "%s" "` + escapeEnvValue(value) + `"`)
	res, err := b.c.Envd().Run(ctx, client.RunRequest{Cmd: cmd, Args: args, Env: b.env, User: "root", Cwd: "/"})
	if err != nil {
		return fmt.Errorf("expanding %s: %w", key, err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("expanding %s: exit code %d: %s", key, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	b.env[key] = string(res.Stdout)
	return nil
}

// escapeEnvValue makes value safe inside double quotes while leaving $VAR
// expansion working.
func escapeEnvValue(value string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "`", "\\`", "$(", `\$(`).Replace(value)
}

// setWorkdir resolves dir against the current workdir, creates what is
// missing for the current user and makes it the workdir.
func (b *builder) setWorkdir(ctx context.Context, dir string) error {
	abs, err := b.resolve(ctx, dir)
	if err != nil {
		return err
	}
	if _, err := b.root(ctx, "creating "+abs, mkdirOwnedScript, abs, b.user); err != nil {
		return err
	}
	b.workdir = abs
	return nil
}

// resolve makes p absolute against the workdir, or the current user's home
// when there is none yet.
func (b *builder) resolve(ctx context.Context, p string) (string, error) {
	if path.IsAbs(p) {
		return path.Clean(p), nil
	}
	base := b.workdir
	if base == "" {
		entry, err := b.c.Envd().Stat(ctx, "~", b.user)
		if err != nil {
			return "", fmt.Errorf("home directory of %s: %w", b.user, err)
		}
		base = entry.GetPath()
	}
	return path.Join(base, p), nil
}

// setUser creates name when missing (with admin rights when asked and the
// image has a sudo/admin group) and makes it the default user.
func (b *builder) setUser(ctx context.Context, step, name string, admin bool) error {
	out, err := b.root(ctx, "creating user "+name, ensureUserScript, name, strconv.FormatBool(admin))
	if err != nil {
		return err
	}
	for line := range strings.Lines(out) {
		b.emit(step, e2b.LogInfo, strings.TrimRight(line, "\n"))
	}
	b.user = name
	return nil
}
