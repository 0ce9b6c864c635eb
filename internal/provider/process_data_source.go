package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/datasourcevalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

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
	for _, pair := range processExclusive() {
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

// processDataSourceAttributes are processAttributes as the data source's attributes.
func processDataSourceAttributes() map[string]dschema.Attribute {
	out := map[string]dschema.Attribute{}
	for _, a := range processAttributes() {
		switch a.kind {
		case stringAttribute:
			out[a.name] = dschema.StringAttribute{MarkdownDescription: a.description, Optional: a.argument, Computed: a.result, Validators: a.strings}
		case int64Attribute:
			out[a.name] = dschema.Int64Attribute{MarkdownDescription: a.description, Optional: a.argument, Computed: a.result, Validators: a.int64s}
		case boolAttribute:
			out[a.name] = dschema.BoolAttribute{MarkdownDescription: a.description, Optional: a.argument, Computed: a.result}
		case stringListAttribute:
			out[a.name] = dschema.ListAttribute{MarkdownDescription: a.description, Optional: a.argument, Computed: a.result, ElementType: types.StringType}
		case stringMapAttribute:
			out[a.name] = dschema.MapAttribute{MarkdownDescription: a.description, Optional: a.argument, Computed: a.result, ElementType: types.StringType}
		}
	}
	return out
}
