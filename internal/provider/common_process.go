package provider

// What e2b_process's data source, ephemeral resource and action share: the model, the
// schema as one table of attributes, and the run.

import (
	"context"
	"errors"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	envd "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/sandboxrun"
)

// processArgumentsModel is what runs and how, in a new sandbox of template: the action's
// model, and the arguments the data source and the ephemeral resource share with it.
type processArgumentsModel struct {
	commandModel
	Template         types.String `tfsdk:"template"`
	Stdin            types.String `tfsdk:"stdin"`
	MaxOutputBytes   types.Int64  `tfsdk:"max_output_bytes"`
	AllowNonZeroExit types.Bool   `tfsdk:"allow_non_zero_exit"`
}

// processModel is the data source's and the ephemeral resource's model: the
// two share one implementation, runProcess, and one schema, processAttributes.
type processModel struct {
	processArgumentsModel
	SandboxID       types.String `tfsdk:"sandbox_id"`
	ExitCode        types.Int64  `tfsdk:"exit_code"`
	Stdout          types.String `tfsdk:"stdout"`
	Stderr          types.String `tfsdk:"stderr"`
	StdoutTruncated types.Bool   `tfsdk:"stdout_truncated"`
	StderrTruncated types.Bool   `tfsdk:"stderr_truncated"`
}

// processExclusive are the pairs of which exactly one must be set.
func processExclusive() [][]path.Expression {
	return [][]path.Expression{
		{path.MatchRoot("template"), path.MatchRoot("sandbox_id")},
		{path.MatchRoot("command"), path.MatchRoot("cmd")},
	}
}

// The longer descriptions the data source and the ephemeral resource share.
const (
	processTemplateDescription = "Template to start a new sandbox from: `name`, `name:tag`, `name:<build ID>` or a template ID. " +
		"The sandbox is killed when the command ends, also on error and cancellation. Exactly one of " +
		"`template` and `sandbox_id` is required."
	processSandboxIDDescription = "A running sandbox to run the command in (it is left running). When `template` is given, " +
		"the ID of the sandbox that was created for the command (and killed since)."
	processStdinDescription        = "Text sent to the command's standard input, followed by end of file. Without it the command has no standard input."
	processMaxOutputDescription    = "Bytes kept of each of stdout and stderr (default 1 MiB = 1048576); the rest is discarded and flagged in `stdout_truncated` / `stderr_truncated`."
	processAllowNonZeroDescription = "Accept a non-zero exit code instead of failing with the command's stderr (default `false`)."

	processActionTemplateDescription = "Template to start the sandbox from: `name`, `name:tag`, `name:<build ID>` or a template ID. " +
		"Every invocation starts a new sandbox, killed when the command ends, also on error and cancellation."
	processActionEnvDescription = commandEnvDescription + " Their values of 4 bytes or more are masked (`***`) in the " +
		"progress: pass secrets here, not in `command`."
	processActionMaxOutputDescription = "Bytes of each of stdout and stderr sent as progress (default 1 MiB = 1048576) and kept for the " +
		"error message; the lines past it are not shown, which the last progress message says."
	processActionAllowNonZeroDescription = "Accept a non-zero exit code instead of failing the invocation with the exit code and " +
		"the command's stderr (default `false`)."
)

const processDescription = "Runs one command in an E2B sandbox and returns its exit code and output: in a new " +
	"sandbox started from `template` (killed when the command ends, also on error and cancellation), or in the " +
	"running sandbox `sandbox_id`. A non-zero exit code fails unless `allow_non_zero_exit` is set; the error " +
	"shows the command's stderr."

// processAttribute is one attribute of e2b_process, described once for every schema
// package that declares it: datasource/schema, ephemeral/schema and action/schema. Their
// attribute types differ (an action's take no Computed), so each declaration turns the
// table into its own (processDataSourceAttributes, processEphemeralAttributes,
// processActionAttributes).
type processAttribute struct {
	name        string
	kind        processAttributeKind
	description string
	// argument is set by the configuration (Optional), result by the run (Computed);
	// sandbox_id is both. An action, which has no results and always starts a sandbox,
	// takes the arguments that are no result.
	argument, result bool
	// actionDescription replaces description in the action, where it differs.
	actionDescription string
	// actionRequired: the action requires it (template, its one way to name a sandbox).
	actionRequired bool
	strings        []validator.String
	int64s         []validator.Int64
}

// processAttributeKind is an attribute's type.
type processAttributeKind int

const (
	stringAttribute processAttributeKind = iota
	int64Attribute
	boolAttribute
	stringListAttribute
	stringMapAttribute
)

// processAttributes are e2b_process's attributes: the command (commandModel's, as the gate
// of e2b_alias has them), where it runs and what it is given, then what it returned.
func processAttributes() []processAttribute {
	return []processAttribute{
		{name: "template", kind: stringAttribute, argument: true, description: processTemplateDescription,
			actionRequired: true, actionDescription: processActionTemplateDescription,
			strings: []validator.String{templateRunRefValidator()}},
		{name: "sandbox_id", kind: stringAttribute, argument: true, result: true, description: processSandboxIDDescription,
			strings: []validator.String{sandboxIDValidator()}},
		{name: "command", kind: stringAttribute, argument: true, description: commandDescription},
		{name: "cmd", kind: stringAttribute, argument: true, description: commandCmdDescription},
		{name: "args", kind: stringListAttribute, argument: true, description: commandArgsDescription},
		{name: "env", kind: stringMapAttribute, argument: true, description: commandEnvDescription,
			actionDescription: processActionEnvDescription},
		{name: "cwd", kind: stringAttribute, argument: true, description: commandCwdDescription},
		{name: "user", kind: stringAttribute, argument: true, description: commandUserDescription},
		{name: "stdin", kind: stringAttribute, argument: true, description: processStdinDescription},
		{name: "timeout", kind: stringAttribute, argument: true, description: commandTimeoutDescription,
			strings: []validator.String{durationValidator(processTimeoutRange)}},
		{name: "max_output_bytes", kind: int64Attribute, argument: true, description: processMaxOutputDescription,
			actionDescription: processActionMaxOutputDescription,
			int64s:            []validator.Int64{int64Between(1, 64<<20)}},
		{name: "allow_non_zero_exit", kind: boolAttribute, argument: true, description: processAllowNonZeroDescription,
			actionDescription: processActionAllowNonZeroDescription},
		{name: "exit_code", kind: int64Attribute, result: true, description: "Exit code of the command."},
		{name: "stdout", kind: stringAttribute, result: true, description: "Standard output (invalid UTF-8 replaced by U+FFFD)."},
		{name: "stderr", kind: stringAttribute, result: true, description: "Standard error (invalid UTF-8 replaced by U+FFFD)."},
		{name: "stdout_truncated", kind: boolAttribute, result: true, description: "Whether stdout exceeded `max_output_bytes`."},
		{name: "stderr_truncated", kind: boolAttribute, result: true, description: "Whether stderr exceeded `max_output_bytes`."},
	}
}

// runProcess runs the command m describes (sandboxrun.Run) and fills its outputs.
func runProcess(ctx context.Context, data *ProviderData, m *processModel) (diags diag.Diagnostics) {
	req, diags := m.request(ctx)
	req.SandboxID = m.SandboxID.ValueString()
	if diags.HasError() {
		return diags
	}
	res, d := runSandboxCommand(ctx, data, req, nil)
	diags.Append(d...)
	if diags.HasError() {
		return diags
	}
	out := res.Output
	m.SandboxID = types.StringValue(res.SandboxID)
	m.ExitCode = types.Int64Value(int64(out.ExitCode))
	m.Stdout = types.StringValue(validUTF8(out.Stdout))
	m.Stderr = types.StringValue(validUTF8(out.Stderr))
	m.StdoutTruncated = types.BoolValue(out.StdoutTruncated)
	m.StderrTruncated = types.BoolValue(out.StderrTruncated)
	m.checkExit(&diags, req, res)
	return diags
}

// request is the run m describes, without a sandbox to run in when m names no template.
func (m *processArgumentsModel) request(ctx context.Context) (sandboxrun.Request, diag.Diagnostics) {
	run, diags := m.runRequest(ctx, path.Empty())
	req := sandboxrun.Request{Template: m.Template.ValueString(), Run: run}
	if !m.MaxOutputBytes.IsNull() {
		req.Run.MaxOutputBytes = m.MaxOutputBytes.ValueInt64()
	}
	if !m.Stdin.IsNull() {
		req.Run.Stdin = strings.NewReader(m.Stdin.ValueString())
	}
	return req, diags
}

// checkExit fails a run that exited non-zero, unless m allows it.
func (m *processArgumentsModel) checkExit(diags *diag.Diagnostics, req sandboxrun.Request, res *sandboxrun.Result) {
	if res.Output.ExitCode != 0 && !m.AllowNonZeroExit.ValueBool() {
		diags.AddError("Command failed", sandboxrun.ExitMessage(req, res, "Set allow_non_zero_exit to accept that."))
	}
}

// runSandboxCommand runs req (sandboxrun.Run), each output line handed to onLine when it
// is set, and explains the errors; the result holds output unless diagnostics hold an error.
func runSandboxCommand(ctx context.Context, data *ProviderData, req sandboxrun.Request, onLine func(envd.Stream, string)) (*sandboxrun.Result, diag.Diagnostics) {
	var diags diag.Diagnostics
	api := apiOrError(data, &diags)
	if diags.HasError() {
		return nil, diags
	}
	ctx = data.logContext(ctx)
	res, err := sandboxrun.Run(ctx, api, req, sandboxrun.Options{
		Connect: data.Envd,
		Logger:  tflogLogger{},
		Secret:  func(ctx context.Context, token string) context.Context { return tflog.MaskMessageStrings(ctx, token) },
		OnLine:  onLine,
	})
	addRunWarnings(&diags, res)
	var runErr *sandboxrun.Error
	switch {
	case err == nil:
	case errors.As(err, &runErr) && runErr.Stage == sandboxrun.StageCreate:
		diags.AddAttributeError(path.Root("template"), "Starting a sandbox from "+req.Template, err.Error())
	case errors.As(err, &runErr) && runErr.Stage == sandboxrun.StageGet:
		diags.AddAttributeError(path.Root("sandbox_id"), "Reading sandbox "+req.SandboxID, err.Error())
	case errors.As(err, &runErr) && runErr.Stage == sandboxrun.StageConnect:
		diags.AddError("Reaching sandbox "+res.SandboxID, err.Error())
	default:
		diags.AddError("Running a command in sandbox "+res.SandboxID, err.Error())
	}
	return res, diags
}

// validUTF8 is output as a Terraform string: invalid UTF-8 replaced by U+FFFD.
func validUTF8(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }
