package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/ephemeralvalidator"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	eschema "github.com/hashicorp/terraform-plugin-framework/ephemeral/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

var (
	_ ephemeral.EphemeralResourceWithConfigure        = (*processEphemeralResource)(nil)
	_ ephemeral.EphemeralResourceWithConfigValidators = (*processEphemeralResource)(nil)
)

// NewProcessEphemeralResource is the ephemeral twin of the e2b_process data
// source: the same command, with output that never lands in state or plan.
func NewProcessEphemeralResource() ephemeral.EphemeralResource { return &processEphemeralResource{} }

type processEphemeralResource struct {
	data *ProviderData
}

func (r *processEphemeralResource) Metadata(_ context.Context, req ephemeral.MetadataRequest, resp *ephemeral.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_process"
}

func (r *processEphemeralResource) Schema(_ context.Context, _ ephemeral.SchemaRequest, resp *ephemeral.SchemaResponse) {
	resp.Schema = eschema.Schema{
		MarkdownDescription: processDescription + " Being ephemeral (Terraform 1.10 and later), its output is " +
			"never stored in the plan or the state: use it for commands whose output is secret.",
		Attributes: map[string]eschema.Attribute{
			"template": eschema.StringAttribute{
				MarkdownDescription: processTemplateDescription,
				Optional:            true,
				Validators:          []validator.String{templateRunRefValidator()},
			},
			"sandbox_id": eschema.StringAttribute{
				MarkdownDescription: processSandboxIDDescription,
				Optional:            true,
				Computed:            true,
				Validators:          []validator.String{sandboxIDValidator()},
			},
			"command": eschema.StringAttribute{MarkdownDescription: commandDescription, Optional: true},
			"cmd":     eschema.StringAttribute{MarkdownDescription: commandCmdDescription, Optional: true},
			"args":    eschema.ListAttribute{MarkdownDescription: commandArgsDescription, Optional: true, ElementType: types.StringType},
			"env":     eschema.MapAttribute{MarkdownDescription: commandEnvDescription, Optional: true, ElementType: types.StringType},
			"cwd":     eschema.StringAttribute{MarkdownDescription: commandCwdDescription, Optional: true},
			"user":    eschema.StringAttribute{MarkdownDescription: commandUserDescription, Optional: true},
			"stdin":   eschema.StringAttribute{MarkdownDescription: processStdinDescription, Optional: true},
			"timeout": eschema.StringAttribute{MarkdownDescription: commandTimeoutDescription, Optional: true, Validators: []validator.String{durationValidator(processTimeoutRange)}},
			"max_output_bytes": eschema.Int64Attribute{
				MarkdownDescription: processMaxOutputDescription,
				Optional:            true,
				Validators:          []validator.Int64{int64Between(1, 64<<20)},
			},
			"allow_non_zero_exit": eschema.BoolAttribute{MarkdownDescription: processAllowNonZeroDescription, Optional: true},
			"exit_code":           eschema.Int64Attribute{MarkdownDescription: "Exit code of the command.", Computed: true},
			"stdout":              eschema.StringAttribute{MarkdownDescription: "Standard output (invalid UTF-8 replaced by U+FFFD).", Computed: true},
			"stderr":              eschema.StringAttribute{MarkdownDescription: "Standard error (invalid UTF-8 replaced by U+FFFD).", Computed: true},
			"stdout_truncated":    eschema.BoolAttribute{MarkdownDescription: "Whether stdout exceeded `max_output_bytes`.", Computed: true},
			"stderr_truncated":    eschema.BoolAttribute{MarkdownDescription: "Whether stderr exceeded `max_output_bytes`.", Computed: true},
		},
	}
}

func (r *processEphemeralResource) ConfigValidators(context.Context) []ephemeral.ConfigValidator {
	var out []ephemeral.ConfigValidator
	for _, pair := range processExclusive {
		out = append(out, ephemeralvalidator.ExactlyOneOf(pair...))
	}
	return out
}

func (r *processEphemeralResource) Configure(_ context.Context, req ephemeral.ConfigureRequest, resp *ephemeral.ConfigureResponse) {
	r.data, resp.Diagnostics = providerDataFrom(req.ProviderData)
}

func (r *processEphemeralResource) Open(ctx context.Context, req ephemeral.OpenRequest, resp *ephemeral.OpenResponse) {
	var m processModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(runProcess(ctx, r.data, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.Result.Set(ctx, &m)...)
}
