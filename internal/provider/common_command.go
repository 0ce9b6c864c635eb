package provider

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	envd "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/sandboxrun"
)

// commandModel is a command to run in a sandbox: the arguments e2b_process and
// e2b_alias's gate share, with the same names, descriptions and validators.
type commandModel struct {
	Command types.String `tfsdk:"command"`
	Cmd     types.String `tfsdk:"cmd"`
	Args    types.List   `tfsdk:"args"`
	Env     types.Map    `tfsdk:"env"`
	Cwd     types.String `tfsdk:"cwd"`
	User    types.String `tfsdk:"user"`
	Timeout types.String `tfsdk:"timeout"`
}

// The descriptions of commandModel's attributes.
const (
	commandDescription        = "Shell command, run as `/bin/bash -l -c <command>`. As on E2B it ends once it exited and every background process it started closed the output it inherited: redirect a daemon's output (`daemon >/dev/null 2>&1 &`) for the command to return. Exactly one of `command` and `cmd` is required."
	commandCmdDescription     = "Program to run directly, without a shell; with `args`."
	commandArgsDescription    = "Arguments of `cmd`."
	commandEnvDescription     = "Environment variables added to the sandbox's."
	commandCwdDescription     = "Working directory; defaults to the template's workdir, else the user's home."
	commandUserDescription    = "OS user to run as; defaults to the template's user."
	commandTimeoutDescription = "How long the command may run, as a duration such as `30s` or `5m`, from `1s` to `24h` (default `60s`); it is killed then and the run fails."
)

// runRequest is the command m describes, its output capped at the default; errors name
// the attribute below at (path.Empty() for top-level attributes). Unknown values are
// taken as unset, so that validation can call it during plan.
func (m *commandModel) runRequest(ctx context.Context, at path.Path) (envd.RunRequest, diag.Diagnostics) {
	var diags diag.Diagnostics
	req := envd.RunRequest{
		Command:        m.Command.ValueString(),
		Cmd:            m.Cmd.ValueString(),
		Cwd:            m.Cwd.ValueString(),
		User:           m.User.ValueString(),
		Timeout:        sandboxrun.DefaultTimeout,
		MaxOutputBytes: envd.DefaultMaxOutputBytes,
	}
	if !m.Timeout.IsNull() && !m.Timeout.IsUnknown() {
		d, err := processTimeoutRange.parse(m.Timeout.ValueString())
		if err != nil {
			addInvalid(&diags, at.AtName("timeout"), fmt.Sprintf("%q", m.Timeout.ValueString()), processTimeoutRange.describe(), err)
		}
		req.Timeout = d
	}
	if !m.Args.IsUnknown() && noneUnknown(slices.Values(m.Args.Elements())) {
		diags.Append(m.Args.ElementsAs(ctx, &req.Args, false)...)
	}
	if !m.Env.IsUnknown() && noneUnknown(maps.Values(m.Env.Elements())) {
		diags.Append(m.Env.ElementsAs(ctx, &req.Env, false)...)
	}
	if !m.Args.IsNull() && m.Cmd.IsNull() {
		addInvalid(&diags, at.AtName("args"), "set without cmd", "must come with cmd: args are the arguments of cmd",
			errors.New("with command, write them into the shell string"))
	}
	return req, diags
}

// noneUnknown reports whether none of values is unknown.
func noneUnknown(values iter.Seq[attr.Value]) bool {
	for v := range values {
		if v.IsUnknown() {
			return false
		}
	}
	return true
}

// addRunWarnings reports what did not fail a run of sandboxrun: a sandbox not killed.
func addRunWarnings(diags *diag.Diagnostics, res *sandboxrun.Result) {
	for _, w := range res.Warnings {
		diags.AddWarning("Sandbox not killed", w)
	}
}
