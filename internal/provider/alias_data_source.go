package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

var _ datasource.DataSourceWithConfigure = (*aliasDataSource)(nil)

// NewAliasDataSource is the e2b_alias data source.
func NewAliasDataSource() datasource.DataSource { return &aliasDataSource{} }

type aliasDataSource struct {
	data *ProviderData
}

type aliasDataModel struct {
	Template types.String `tfsdk:"template"`
	Tag      types.String `tfsdk:"tag"`
	BuildID  types.String `tfsdk:"build_id"`
}

func (d *aliasDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_alias"
}

func (d *aliasDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = dschema.Schema{
		MarkdownDescription: "Reads the build a tag of a template points at now, such as a base image tag another " +
			"team moves. Building `from_template = \"base:${data.e2b_alias.base.build_id}\"` pins that build, so " +
			"when the tag moves the plan shows the dependent build being replaced. A tag that does not exist, or has " +
			"no ready build, is an error.",
		Attributes: map[string]dschema.Attribute{
			"template": dschema.StringAttribute{
				MarkdownDescription: "Template name (or ID) the tag belongs to, without a tag.",
				Required:            true,
				Validators:          []validator.String{templateRefValidator()},
			},
			"tag": dschema.StringAttribute{
				MarkdownDescription: "The tag, such as `prod`; `default` is the tag every new build takes.",
				Required:            true,
				Validators:          []validator.String{stringCheck{"must be a tag (a-z, 0-9, '-', '_', '.')", e2b.ValidateTag}},
			},
			"build_id": dschema.StringAttribute{
				MarkdownDescription: "The build sandboxes started from `template:tag` run: the tag's newest ready build. " +
					"While the tag's newest assignment is a build that is not ready (one in progress, or one that " +
					"failed) and an earlier build still serves the tag, reading fails: E2B's API does not name that build.",
				Computed: true,
			},
		},
	}
}

func (d *aliasDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data, resp.Diagnostics = providerDataFrom(req.ProviderData)
}

func (d *aliasDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m aliasDataModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	api := apiOrError(d.data, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx = d.data.logContext(ctx)
	template := m.Template.ValueString()
	tag, err := e2b.NormalizeTag(m.Tag.ValueString())
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("tag"), "Invalid tag", err.Error())
		return
	}
	templateID, diags := resolveTemplateID(ctx, api, template)
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	res, err := api.ResolveTag(ctx, templateID, tag)
	if err != nil {
		resp.Diagnostics.AddError("Reading tags of "+template, err.Error())
		return
	}
	if res.BuildID == "" {
		title, detail := unresolvedTag(template, tag, res)
		resp.Diagnostics.AddAttributeError(path.Root("tag"), title, detail)
		return
	}
	m.BuildID = types.StringValue(res.BuildID)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
