package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/ephemeralvalidator"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	eschema "github.com/hashicorp/terraform-plugin-framework/ephemeral/schema"
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
		Attributes: processEphemeralAttributes(),
	}
}

func (r *processEphemeralResource) ConfigValidators(context.Context) []ephemeral.ConfigValidator {
	var out []ephemeral.ConfigValidator
	for _, pair := range processExclusive() {
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

// processEphemeralAttributes are processAttributes as the ephemeral resource's attributes.
func processEphemeralAttributes() map[string]eschema.Attribute {
	out := map[string]eschema.Attribute{}
	for _, a := range processAttributes() {
		switch a.kind {
		case stringAttribute:
			out[a.name] = eschema.StringAttribute{MarkdownDescription: a.description, Optional: a.argument, Computed: a.result, Validators: a.strings}
		case int64Attribute:
			out[a.name] = eschema.Int64Attribute{MarkdownDescription: a.description, Optional: a.argument, Computed: a.result, Validators: a.int64s}
		case boolAttribute:
			out[a.name] = eschema.BoolAttribute{MarkdownDescription: a.description, Optional: a.argument, Computed: a.result}
		case stringListAttribute:
			out[a.name] = eschema.ListAttribute{MarkdownDescription: a.description, Optional: a.argument, Computed: a.result, ElementType: types.StringType}
		case stringMapAttribute:
			out[a.name] = eschema.MapAttribute{MarkdownDescription: a.description, Optional: a.argument, Computed: a.result, ElementType: types.StringType}
		}
	}
	return out
}
