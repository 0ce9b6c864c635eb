package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/datasourcevalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	eschema "github.com/hashicorp/terraform-plugin-framework/ephemeral/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	envd "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
)

// Defaults of the process data source and ephemeral resource.
const (
	defaultProcessTimeout = 60 * time.Second
	// sandboxGrace is how much longer than the command a sandbox created for
	// it may live: if the provider dies before it kills the sandbox, E2B
	// still ends it soon after.
	sandboxGrace = 60 * time.Second
	// killTimeout bounds the cleanup kill, which runs even after the
	// operation was cancelled.
	killTimeout = 30 * time.Second
	// errorOutputBytes is how much of stderr an error message shows.
	errorOutputBytes = 4096
)

// processModel is the data source's and the ephemeral resource's model: the
// two share one implementation, runProcess.
type processModel struct {
	Template         types.String `tfsdk:"template"`
	SandboxID        types.String `tfsdk:"sandbox_id"`
	Command          types.String `tfsdk:"command"`
	Cmd              types.String `tfsdk:"cmd"`
	Args             types.List   `tfsdk:"args"`
	Env              types.Map    `tfsdk:"env"`
	Cwd              types.String `tfsdk:"cwd"`
	User             types.String `tfsdk:"user"`
	Stdin            types.String `tfsdk:"stdin"`
	Timeout          types.String `tfsdk:"timeout"`
	MaxOutputBytes   types.Int64  `tfsdk:"max_output_bytes"`
	AllowNonZeroExit types.Bool   `tfsdk:"allow_non_zero_exit"`
	ExitCode         types.Int64  `tfsdk:"exit_code"`
	Stdout           types.String `tfsdk:"stdout"`
	Stderr           types.String `tfsdk:"stderr"`
	StdoutTruncated  types.Bool   `tfsdk:"stdout_truncated"`
	StderrTruncated  types.Bool   `tfsdk:"stderr_truncated"`
}

// processAttr describes one attribute once for both schemas.
type processAttr struct {
	kind        string // "string", "int64", "bool", "list", "map"
	description string
	optional    bool
	computed    bool
	validators  []validator.String // for kind "string"
	int64Checks []validator.Int64  // for kind "int64"
}

var processAttrs = map[string]processAttr{
	"template": {kind: "string", optional: true, validators: []validator.String{templateRunRefValidator()},
		description: "Template to start a new sandbox from: `name`, `name:tag`, `name:<build ID>` or a template ID. " +
			"The sandbox is killed when the command ends, also on error and cancellation. Exactly one of " +
			"`template` and `sandbox_id` is required."},
	"sandbox_id": {kind: "string", optional: true, computed: true, validators: []validator.String{sandboxIDValidator()},
		description: "A running sandbox to run the command in (it is left running). When `template` is given, " +
			"the ID of the sandbox that was created for the command (and killed since)."},
	"command": {kind: "string", optional: true,
		description: "Shell command, run as `/bin/bash -l -c <command>`. Exactly one of `command` and `cmd` is required."},
	"cmd":  {kind: "string", optional: true, description: "Program to run directly, without a shell; with `args`."},
	"args": {kind: "list", optional: true, description: "Arguments of `cmd`."},
	"env":  {kind: "map", optional: true, description: "Environment variables added to the sandbox's."},
	"cwd":  {kind: "string", optional: true, description: "Working directory; defaults to the template's workdir, else the user's home."},
	"user": {kind: "string", optional: true, description: "OS user to run as; defaults to the template's user."},
	"stdin": {kind: "string", optional: true,
		description: "Text sent to the command's standard input, followed by end of file. Without it the command has no standard input."},
	"timeout": {kind: "string", optional: true, validators: []validator.String{durationValidator()},
		description: "How long the command may run, as a duration such as `30s` or `5m` (default `60s`); it is killed then and the read fails."},
	"max_output_bytes": {kind: "int64", optional: true, int64Checks: []validator.Int64{int64validator.Between(1, 64<<20)},
		description: "Bytes kept of each of stdout and stderr (default 1 MiB = 1048576); the rest is discarded and flagged in `stdout_truncated` / `stderr_truncated`."},
	"allow_non_zero_exit": {kind: "bool", optional: true,
		description: "Accept a non-zero exit code instead of failing with the command's stderr (default `false`)."},
	"exit_code":        {kind: "int64", computed: true, description: "Exit code of the command."},
	"stdout":           {kind: "string", computed: true, description: "Standard output (invalid UTF-8 replaced by U+FFFD)."},
	"stderr":           {kind: "string", computed: true, description: "Standard error (invalid UTF-8 replaced by U+FFFD)."},
	"stdout_truncated": {kind: "bool", computed: true, description: "Whether stdout exceeded `max_output_bytes`."},
	"stderr_truncated": {kind: "bool", computed: true, description: "Whether stderr exceeded `max_output_bytes`."},
}

func processDataSourceAttributes() map[string]dschema.Attribute {
	out := map[string]dschema.Attribute{}
	for name, a := range processAttrs {
		switch a.kind {
		case "string":
			out[name] = dschema.StringAttribute{MarkdownDescription: a.description, Optional: a.optional, Computed: a.computed, Validators: a.validators}
		case "int64":
			out[name] = dschema.Int64Attribute{MarkdownDescription: a.description, Optional: a.optional, Computed: a.computed, Validators: a.int64Checks}
		case "bool":
			out[name] = dschema.BoolAttribute{MarkdownDescription: a.description, Optional: a.optional, Computed: a.computed}
		case "list":
			out[name] = dschema.ListAttribute{MarkdownDescription: a.description, Optional: a.optional, ElementType: types.StringType}
		case "map":
			out[name] = dschema.MapAttribute{MarkdownDescription: a.description, Optional: a.optional, ElementType: types.StringType}
		}
	}
	return out
}

func processEphemeralAttributes() map[string]eschema.Attribute {
	out := map[string]eschema.Attribute{}
	for name, a := range processAttrs {
		switch a.kind {
		case "string":
			out[name] = eschema.StringAttribute{MarkdownDescription: a.description, Optional: a.optional, Computed: a.computed, Validators: a.validators}
		case "int64":
			out[name] = eschema.Int64Attribute{MarkdownDescription: a.description, Optional: a.optional, Computed: a.computed, Validators: a.int64Checks}
		case "bool":
			out[name] = eschema.BoolAttribute{MarkdownDescription: a.description, Optional: a.optional, Computed: a.computed}
		case "list":
			out[name] = eschema.ListAttribute{MarkdownDescription: a.description, Optional: a.optional, ElementType: types.StringType}
		case "map":
			out[name] = eschema.MapAttribute{MarkdownDescription: a.description, Optional: a.optional, ElementType: types.StringType}
		}
	}
	return out
}

// processExclusive are the pairs of which exactly one must be set.
var processExclusive = [][]path.Expression{
	{path.MatchRoot("template"), path.MatchRoot("sandbox_id")},
	{path.MatchRoot("command"), path.MatchRoot("cmd")},
}

const processDescription = "Runs one command in an E2B sandbox and returns its exit code and output: in a new " +
	"sandbox started from `template` (killed when the command ends, also on error and cancellation), or in the " +
	"running sandbox `sandbox_id`. A non-zero exit code fails unless `allow_non_zero_exit` is set; the error " +
	"shows the command's stderr."

// runProcess runs the command m describes and fills its outputs.
func runProcess(ctx context.Context, data *ProviderData, m *processModel) (diags diag.Diagnostics) {
	api := apiOrError(data, &diags)
	if diags.HasError() {
		return diags
	}
	ctx = data.logContext(ctx)

	req := envd.RunRequest{
		Command:        m.Command.ValueString(),
		Cmd:            m.Cmd.ValueString(),
		Cwd:            m.Cwd.ValueString(),
		User:           m.User.ValueString(),
		Timeout:        defaultProcessTimeout,
		MaxOutputBytes: envd.DefaultMaxOutputBytes,
	}
	if !m.Timeout.IsNull() {
		d, err := parsePositiveDuration(m.Timeout.ValueString())
		if err != nil {
			diags.AddAttributeError(path.Root("timeout"), "Invalid timeout", err.Error())
			return diags
		}
		req.Timeout = d
	}
	if !m.MaxOutputBytes.IsNull() {
		req.MaxOutputBytes = m.MaxOutputBytes.ValueInt64()
	}
	diags.Append(m.Args.ElementsAs(ctx, &req.Args, false)...)
	diags.Append(m.Env.ElementsAs(ctx, &req.Env, false)...)
	if !m.Args.IsNull() && m.Cmd.IsNull() {
		diags.AddAttributeError(path.Root("args"), "args without cmd", "args are the arguments of cmd; with command, write them into the shell string.")
	}
	if diags.HasError() {
		return diags
	}
	if !m.Stdin.IsNull() {
		req.Stdin = strings.NewReader(m.Stdin.ValueString())
	}

	var sb *e2bapi.Sandbox
	if !m.Template.IsNull() {
		ttl := int32((req.Timeout + sandboxGrace + time.Second - 1) / time.Second)
		created, err := api.CreateSandbox(ctx, e2bapi.NewSandbox{TemplateID: m.Template.ValueString(), Timeout: &ttl})
		if err != nil {
			diags.AddAttributeError(path.Root("template"), "Starting a sandbox from "+m.Template.ValueString(), err.Error())
			return diags
		}
		sb = created
		tflog.Info(ctx, "sandbox started", map[string]any{"sandbox_id": sb.SandboxID, "template": m.Template.ValueString()})
		defer func() { diags.Append(killSandbox(ctx, api, sb.SandboxID)...) }()
	} else {
		det, err := api.GetSandbox(ctx, m.SandboxID.ValueString())
		if err != nil {
			diags.AddAttributeError(path.Root("sandbox_id"), "Reading sandbox "+m.SandboxID.ValueString(), err.Error())
			return diags
		}
		sb = &e2bapi.Sandbox{SandboxID: det.SandboxID, TemplateID: det.TemplateID, EnvdVersion: det.EnvdVersion,
			EnvdAccessToken: det.EnvdAccessToken, Domain: det.Domain}
	}
	m.SandboxID = types.StringValue(sb.SandboxID)
	if sb.EnvdAccessToken != "" {
		ctx = tflog.MaskMessageStrings(ctx, sb.EnvdAccessToken)
	}

	client, err := data.Envd(sb)
	if err != nil {
		diags.AddError("Reaching sandbox "+sb.SandboxID, err.Error())
		return diags
	}
	started := time.Now()
	res, err := client.Run(ctx, req)
	what := describeCommand(req)
	if err != nil {
		var pe *envd.ProcessError
		detail := err.Error()
		switch {
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			detail = fmt.Sprintf("%s did not end within the timeout of %s and was killed.", what, req.Timeout)
		case errors.As(err, &pe):
			detail = fmt.Sprintf("%s did not exit normally: %s.", what, pe.Status)
		}
		if res != nil {
			detail += outputTail("stderr", res.Stderr)
		}
		diags.AddError("Running a command in sandbox "+sb.SandboxID, detail)
		return diags
	}
	tflog.Info(ctx, "command ended", map[string]any{
		"sandbox_id": sb.SandboxID, "exit_code": res.ExitCode, "stdout_bytes": len(res.Stdout),
		"stderr_bytes": len(res.Stderr), "duration_ms": time.Since(started).Milliseconds(),
	})
	if res.StdinError != "" {
		tflog.Warn(ctx, "not all of stdin was delivered", map[string]any{"reason": res.StdinError})
	}
	m.ExitCode = types.Int64Value(int64(res.ExitCode))
	m.Stdout = types.StringValue(strings.ToValidUTF8(string(res.Stdout), "\uFFFD"))
	m.Stderr = types.StringValue(strings.ToValidUTF8(string(res.Stderr), "\uFFFD"))
	m.StdoutTruncated = types.BoolValue(res.StdoutTruncated)
	m.StderrTruncated = types.BoolValue(res.StderrTruncated)
	if res.ExitCode != 0 && !m.AllowNonZeroExit.ValueBool() {
		diags.AddError("Command failed",
			fmt.Sprintf("%s exited with code %d in sandbox %s. Set allow_non_zero_exit to accept that.%s",
				what, res.ExitCode, sb.SandboxID, outputTail("stderr", res.Stderr)))
	}
	return diags
}

// killSandbox ends a sandbox created for a command, also when ctx was
// cancelled: a sandbox left running would cost money until its timeout.
func killSandbox(ctx context.Context, api *e2bapi.Client, sandboxID string) diag.Diagnostics {
	var diags diag.Diagnostics
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
	defer cancel()
	err := api.KillSandbox(ctx, sandboxID)
	if err != nil && !e2bapi.IsNotFound(err) {
		diags.AddWarning("Sandbox not killed",
			fmt.Sprintf("Sandbox %s, started for the command, could not be killed: %v. It ends by itself when its timeout passes.", sandboxID, err))
		return diags
	}
	tflog.Info(ctx, "sandbox killed", map[string]any{"sandbox_id": sandboxID})
	return diags
}

func describeCommand(req envd.RunRequest) string {
	s := req.Command
	if req.Cmd != "" {
		s = strings.Join(append([]string{req.Cmd}, req.Args...), " ")
	}
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return fmt.Sprintf("Command %q", s)
}

// outputTail is the end of a stream for an error message.
func outputTail(name string, b []byte) string {
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

var (
	_ datasource.DataSourceWithConfigure        = (*processDataSource)(nil)
	_ datasource.DataSourceWithConfigValidators = (*processDataSource)(nil)
)

// NewProcessDataSource is the e2b_process data source.
func NewProcessDataSource() datasource.DataSource { return &processDataSource{} }

type processDataSource struct {
	data *ProviderData
}

func (d *processDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_process"
}

func (d *processDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = dschema.Schema{
		MarkdownDescription: processDescription + " The output is stored in the state; the ephemeral resource " +
			"`e2b_process` (Terraform 1.10 and later) keeps it out.\n\nThe command runs on every plan and apply that reads this data source.",
		Attributes: processDataSourceAttributes(),
	}
}

func (d *processDataSource) ConfigValidators(context.Context) []datasource.ConfigValidator {
	var out []datasource.ConfigValidator
	for _, pair := range processExclusive {
		out = append(out, datasourcevalidator.ExactlyOneOf(pair...))
	}
	return out
}

func (d *processDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data, resp.Diagnostics = providerDataFrom(req.ProviderData)
}

func (d *processDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m processModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(runProcess(ctx, d.data, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
