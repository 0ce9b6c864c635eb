package provider

import (
	"context"
	"errors"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/datasourcevalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/sandboxrun"
)

// processModel is the data source's and the ephemeral resource's model: the
// two share one implementation, runProcess, and their schemas, written out in
// each file, must stay the same (TestProcessSchemasMatchModel).
type processModel struct {
	commandModel
	Template         types.String `tfsdk:"template"`
	SandboxID        types.String `tfsdk:"sandbox_id"`
	Stdin            types.String `tfsdk:"stdin"`
	MaxOutputBytes   types.Int64  `tfsdk:"max_output_bytes"`
	AllowNonZeroExit types.Bool   `tfsdk:"allow_non_zero_exit"`
	ExitCode         types.Int64  `tfsdk:"exit_code"`
	Stdout           types.String `tfsdk:"stdout"`
	Stderr           types.String `tfsdk:"stderr"`
	StdoutTruncated  types.Bool   `tfsdk:"stdout_truncated"`
	StderrTruncated  types.Bool   `tfsdk:"stderr_truncated"`
}

// processExclusive are the pairs of which exactly one must be set.
var processExclusive = [][]path.Expression{
	{path.MatchRoot("template"), path.MatchRoot("sandbox_id")},
	{path.MatchRoot("command"), path.MatchRoot("cmd")},
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
)

const processDescription = "Runs one command in an E2B sandbox and returns its exit code and output: in a new " +
	"sandbox started from `template` (killed when the command ends, also on error and cancellation), or in the " +
	"running sandbox `sandbox_id`. A non-zero exit code fails unless `allow_non_zero_exit` is set; the error " +
	"shows the command's stderr."

// runProcess runs the command m describes (sandboxrun.Run) and fills its outputs.
func runProcess(ctx context.Context, data *ProviderData, m *processModel) (diags diag.Diagnostics) {
	api := apiOrError(data, &diags)
	if diags.HasError() {
		return diags
	}
	ctx = data.logContext(ctx)

	run, d := m.runRequest(ctx, path.Empty())
	diags.Append(d...)
	req := sandboxrun.Request{Template: m.Template.ValueString(), SandboxID: m.SandboxID.ValueString(), Run: run}
	if !m.MaxOutputBytes.IsNull() {
		req.Run.MaxOutputBytes = m.MaxOutputBytes.ValueInt64()
	}
	if diags.HasError() {
		return diags
	}
	if !m.Stdin.IsNull() {
		req.Run.Stdin = strings.NewReader(m.Stdin.ValueString())
	}

	res, err := sandboxrun.Run(ctx, api, req, sandboxrun.Options{
		Connect: data.Envd,
		Logger:  tflogLogger{},
		Secret:  func(ctx context.Context, token string) context.Context { return tflog.MaskMessageStrings(ctx, token) },
	})
	addRunWarnings(&diags, res)
	var runErr *sandboxrun.Error
	switch {
	case err == nil:
	case errors.As(err, &runErr) && runErr.Stage == sandboxrun.StageCreate:
		diags.AddAttributeError(path.Root("template"), "Starting a sandbox from "+req.Template, err.Error())
		return diags
	case errors.As(err, &runErr) && runErr.Stage == sandboxrun.StageGet:
		diags.AddAttributeError(path.Root("sandbox_id"), "Reading sandbox "+req.SandboxID, err.Error())
		return diags
	case errors.As(err, &runErr) && runErr.Stage == sandboxrun.StageConnect:
		diags.AddError("Reaching sandbox "+res.SandboxID, err.Error())
		return diags
	default:
		diags.AddError("Running a command in sandbox "+res.SandboxID, err.Error())
		return diags
	}
	out := res.Output
	m.SandboxID = types.StringValue(res.SandboxID)
	m.ExitCode = types.Int64Value(int64(out.ExitCode))
	m.Stdout = types.StringValue(strings.ToValidUTF8(string(out.Stdout), "\uFFFD"))
	m.Stderr = types.StringValue(strings.ToValidUTF8(string(out.Stderr), "\uFFFD"))
	m.StdoutTruncated = types.BoolValue(out.StdoutTruncated)
	m.StderrTruncated = types.BoolValue(out.StderrTruncated)
	if out.ExitCode != 0 && !m.AllowNonZeroExit.ValueBool() {
		diags.AddError("Command failed", sandboxrun.ExitMessage(req, res, "Set allow_non_zero_exit to accept that."))
	}
	return diags
}

// addRunWarnings reports what did not fail a run of sandboxrun: a sandbox not killed.
func addRunWarnings(diags *diag.Diagnostics, res *sandboxrun.Result) {
	for _, w := range res.Warnings {
		diags.AddWarning("Sandbox not killed", w)
	}
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
		Attributes: map[string]dschema.Attribute{
			"template": dschema.StringAttribute{
				MarkdownDescription: processTemplateDescription,
				Optional:            true,
				Validators:          []validator.String{templateRunRefValidator()},
			},
			"sandbox_id": dschema.StringAttribute{
				MarkdownDescription: processSandboxIDDescription,
				Optional:            true,
				Computed:            true,
				Validators:          []validator.String{sandboxIDValidator()},
			},
			"command": dschema.StringAttribute{MarkdownDescription: commandDescription, Optional: true},
			"cmd":     dschema.StringAttribute{MarkdownDescription: commandCmdDescription, Optional: true},
			"args":    dschema.ListAttribute{MarkdownDescription: commandArgsDescription, Optional: true, ElementType: types.StringType},
			"env":     dschema.MapAttribute{MarkdownDescription: commandEnvDescription, Optional: true, ElementType: types.StringType},
			"cwd":     dschema.StringAttribute{MarkdownDescription: commandCwdDescription, Optional: true},
			"user":    dschema.StringAttribute{MarkdownDescription: commandUserDescription, Optional: true},
			"stdin":   dschema.StringAttribute{MarkdownDescription: processStdinDescription, Optional: true},
			"timeout": dschema.StringAttribute{MarkdownDescription: commandTimeoutDescription, Optional: true, Validators: []validator.String{durationValidator(processTimeoutRange)}},
			"max_output_bytes": dschema.Int64Attribute{
				MarkdownDescription: processMaxOutputDescription,
				Optional:            true,
				Validators:          []validator.Int64{int64Between(1, 64<<20)},
			},
			"allow_non_zero_exit": dschema.BoolAttribute{MarkdownDescription: processAllowNonZeroDescription, Optional: true},
			"exit_code":           dschema.Int64Attribute{MarkdownDescription: "Exit code of the command.", Computed: true},
			"stdout":              dschema.StringAttribute{MarkdownDescription: "Standard output (invalid UTF-8 replaced by U+FFFD).", Computed: true},
			"stderr":              dschema.StringAttribute{MarkdownDescription: "Standard error (invalid UTF-8 replaced by U+FFFD).", Computed: true},
			"stdout_truncated":    dschema.BoolAttribute{MarkdownDescription: "Whether stdout exceeded `max_output_bytes`.", Computed: true},
			"stderr_truncated":    dschema.BoolAttribute{MarkdownDescription: "Whether stderr exceeded `max_output_bytes`.", Computed: true},
		},
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
