// Package sandboxrun is the use case of e2b_process: run one command in an E2B sandbox,
// either a new one started from a template (killed when the command ends, also on error
// and cancellation) or a running one (left running), and explain what went wrong. It is
// also e2b_alias's (Promote): a tag moves to a build only after a gate command passed in
// a sandbox of that build. It knows nothing of Terraform; the provider turns its results
// into state and diagnostics.
package sandboxrun

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	envd "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
)

const (
	// DefaultTimeout is how long a command may run when the request sets no timeout.
	DefaultTimeout = 60 * time.Second
	// sandboxGrace is how much longer than the command a sandbox created for it may
	// live: if the provider dies before it kills the sandbox, E2B still ends it soon after.
	sandboxGrace = 60 * time.Second
	// killTimeout bounds the cleanup kill, which runs even after the run was cancelled.
	killTimeout = 30 * time.Second
	// errorOutputBytes is how much of a stream an error message shows.
	errorOutputBytes = 4096
)

// Request is one command and where to run it: exactly one of Template and SandboxID.
type Request struct {
	// Template starts a new sandbox: "name", "name:tag", "name:<build ID>" or an ID.
	Template string
	// SandboxID names a running sandbox.
	SandboxID string
	// Run is the command; a zero Timeout is DefaultTimeout.
	Run envd.RunRequest
}

// Options are what Run needs besides the request.
type Options struct {
	// Connect returns a client for the envd of a sandbox.
	Connect func(*e2b.Sandbox) (*envd.Client, error)
	// Logger receives the progress messages; may be nil.
	Logger e2bapi.Logger
	// Secret, when set, is called with the sandbox's envd access token once it is
	// known and returns the context the rest of the run logs with (the provider masks
	// the token there).
	Secret func(ctx context.Context, secret string) context.Context
	// OnLine, when set, sees each line of the command's output as it arrives (all of
	// it, also what exceeds the request's MaxOutputBytes), on Run's goroutine.
	OnLine func(stream envd.Stream, line string)
}

// Result is what the run did.
type Result struct {
	// SandboxID is the sandbox the command ran in (for a Template, killed since).
	SandboxID string
	// Output is the command's; nil when it never ran.
	Output *envd.RunResult
	// Warnings are problems that did not fail the run (a sandbox not killed).
	Warnings []string
}

// Stage is the part of a run an *Error happened in.
type Stage string

// The stages of a run.
const (
	StageCreate  Stage = "create"  // starting a sandbox from Request.Template
	StageGet     Stage = "get"     // reading the sandbox Request.SandboxID
	StageConnect Stage = "connect" // reaching the sandbox's envd
	StageRun     Stage = "run"     // running the command
)

// Error is a run that failed in one stage; its message explains it.
type Error struct {
	Stage     Stage
	SandboxID string
	Err       error
	msg       string
}

func (e *Error) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Run runs req.Run as Request says and returns what happened. A non-zero exit code is no
// error: the caller decides (ExitMessage explains it). Errors are *Error; Result is never
// nil and carries the warnings and the output captured so far.
func Run(ctx context.Context, api *e2bapi.Client, req Request, opts Options) (res *Result, err error) {
	if req.Run.Timeout <= 0 {
		req.Run.Timeout = DefaultTimeout
	}
	log := opts.logger()
	res = &Result{}
	var sb *e2b.Sandbox
	if req.Template != "" {
		ttl := int32((req.Run.Timeout + sandboxGrace + time.Second - 1) / time.Second) //nolint:gosec // bounded by the schema
		created, err := api.CreateSandbox(ctx, e2b.NewSandbox{TemplateID: req.Template, Timeout: &ttl})
		if err != nil {
			return res, &Error{Stage: StageCreate, Err: err}
		}
		sb = created
		log.Info(ctx, "sandbox started", map[string]any{"sandbox_id": sb.SandboxID, "template": req.Template})
		defer func() {
			if w := kill(ctx, api, sb.SandboxID, log); w != "" {
				res.Warnings = append(res.Warnings, w)
			}
		}()
	} else {
		det, err := api.GetSandbox(ctx, req.SandboxID)
		if err != nil {
			return res, &Error{Stage: StageGet, SandboxID: req.SandboxID, Err: err}
		}
		sb = &e2b.Sandbox{SandboxID: det.SandboxID, TemplateID: det.TemplateID, EnvdVersion: det.EnvdVersion,
			EnvdAccessToken: det.EnvdAccessToken, Domain: det.Domain}
	}
	res.SandboxID = sb.SandboxID
	if sb.EnvdAccessToken != "" && opts.Secret != nil {
		ctx = opts.Secret(ctx, sb.EnvdAccessToken)
	}

	client, err := opts.Connect(sb)
	if err != nil {
		return res, &Error{Stage: StageConnect, SandboxID: sb.SandboxID, Err: err}
	}
	started := time.Now()
	var lines *envd.Lines
	if opts.OnLine != nil {
		lines = envd.NewLines(opts.OnLine)
		req.Run.OnOutput = lines.Write
	}
	out, err := client.Run(ctx, req.Run)
	if lines != nil {
		lines.Flush()
	}
	res.Output = out
	if err != nil {
		what := DescribeCommand(req.Run)
		var pe *envd.ProcessError
		detail := err.Error()
		switch {
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			detail = fmt.Sprintf("%s did not end within the timeout of %s and was killed; raise timeout if it needs longer.", what, req.Run.Timeout)
		case errors.As(err, &pe):
			detail = fmt.Sprintf("%s did not exit normally: %s.", what, pe.Status)
		}
		if out != nil {
			detail += OutputTail("stderr", out.Stderr)
		}
		return res, &Error{Stage: StageRun, SandboxID: sb.SandboxID, Err: err, msg: detail}
	}
	log.Info(ctx, "command ended", map[string]any{
		"sandbox_id": sb.SandboxID, "exit_code": out.ExitCode, "stdout_bytes": len(out.Stdout),
		"stderr_bytes": len(out.Stderr), "duration_ms": time.Since(started).Milliseconds(),
	})
	if out.StdinError != "" {
		log.Warn(ctx, "not all of stdin was delivered", map[string]any{"reason": out.StdinError})
	}
	return res, nil
}

// kill ends a sandbox created for a command, also when ctx was cancelled: a sandbox left
// running would cost money until its timeout. It returns a warning when it could not.
func kill(ctx context.Context, api *e2bapi.Client, sandboxID string, log e2bapi.Logger) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
	defer cancel()
	if err := api.KillSandbox(ctx, sandboxID); err != nil && !e2bapi.IsNotFound(err) {
		return fmt.Sprintf("Sandbox %s, started for the command, could not be killed: %v. It ends by itself when its timeout passes.", sandboxID, err)
	}
	log.Info(ctx, "sandbox killed", map[string]any{"sandbox_id": sandboxID})
	return ""
}

// ExitMessage explains a non-zero exit code of the run res; hint says how to accept one.
func ExitMessage(req Request, res *Result, hint string) string {
	return fmt.Sprintf("%s exited with code %d in sandbox %s. %s%s",
		DescribeCommand(req.Run), res.Output.ExitCode, res.SandboxID, hint, OutputTail("stderr", res.Output.Stderr))
}

// DescribeCommand names the command of req in messages, shortened.
func DescribeCommand(req envd.RunRequest) string {
	s := req.Command
	if req.Cmd != "" {
		s = strings.Join(append([]string{req.Cmd}, req.Args...), " ")
	}
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return fmt.Sprintf("Command %q", s)
}

// OutputTail is the end of a stream for an error message.
func OutputTail(name string, b []byte) string {
	if len(b) == 0 {
		return fmt.Sprintf("\n\n(%s is empty)", name)
	}
	cut := ""
	if len(b) > errorOutputBytes {
		b = b[len(b)-errorOutputBytes:]
		cut = "last bytes of "
	}
	return fmt.Sprintf("\n\n%s%s:\n%s", cut, name, strings.ToValidUTF8(string(b), "\uFFFD"))
}

func (o Options) logger() e2bapi.Logger {
	if o.Logger == nil {
		return noopLogger{}
	}
	return o.Logger
}

type noopLogger struct{}

func (noopLogger) Debug(context.Context, string, map[string]any) {}
func (noopLogger) Info(context.Context, string, map[string]any)  {}
func (noopLogger) Warn(context.Context, string, map[string]any)  {}
