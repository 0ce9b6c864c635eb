package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

var _ datasource.DataSourceWithConfigure = (*templatesDataSource)(nil)

// NewTemplatesDataSource is the e2b_templates data source.
func NewTemplatesDataSource() datasource.DataSource { return &templatesDataSource{} }

type templatesDataSource struct {
	data *ProviderData
}

type templatesDataModel struct {
	NamePrefix types.String `tfsdk:"name_prefix"`
	Public     types.Bool   `tfsdk:"public"`
	Templates  types.List   `tfsdk:"templates"`
}

// listedTemplateObject is the type of an element of templates.
var listedTemplateObject = types.ObjectType{AttrTypes: map[string]attr.Type{
	"id":               types.StringType,
	"name":             types.StringType,
	"names":            types.ListType{ElemType: types.StringType},
	"public":           types.BoolType,
	"default_build_id": types.StringType,
	"tags":             types.ListType{ElemType: types.StringType},
}}

func (d *templatesDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_templates"
}

func (d *templatesDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	computedString := func(description string) dschema.StringAttribute {
		return dschema.StringAttribute{MarkdownDescription: description, Computed: true}
	}
	resp.Schema = dschema.Schema{
		MarkdownDescription: "The team's templates as E2B lists them (page by page), with the same filters as the " +
			"`e2b_template` list resource: for adopting existing templates with any CLI, OpenTofu included, which has " +
			"no `terraform query` (see the guide on adopting existing templates).",
		Attributes: map[string]dschema.Attribute{
			"name_prefix": dschema.StringAttribute{MarkdownDescription: namePrefixDescription, Optional: true},
			"public":      dschema.BoolAttribute{MarkdownDescription: publicFilterDescription, Optional: true},
			"templates": dschema.ListNestedAttribute{
				MarkdownDescription: "The templates, in E2B's order.",
				Computed:            true,
				NestedObject: dschema.NestedAttributeObject{Attributes: map[string]dschema.Attribute{
					"id":     computedString("Template ID (an `e2b_template`'s identity and import ID)."),
					"name":   computedString("Template name (its alias), what an `e2b_template` imported by ID takes as `name`."),
					"names":  dschema.ListAttribute{MarkdownDescription: "Full names E2B knows the template by, such as `team/name`.", Computed: true, ElementType: types.StringType},
					"public": dschema.BoolAttribute{MarkdownDescription: "Whether every team may start sandboxes from the template.", Computed: true},
					"default_build_id": computedString("The build the `default` tag names in E2B's tag list (its newest assignment, " +
						"whatever that build's status); null when the template has no such tag."),
					"tags": dschema.ListAttribute{MarkdownDescription: "The template's tags, as E2B's tag list answers them (sorted).", Computed: true, ElementType: types.StringType},
				}},
			},
		},
	}
}

func (d *templatesDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data, resp.Diagnostics = providerDataFrom(req.ProviderData)
}

func (d *templatesDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m templatesDataModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	api := apiOrError(d.data, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx = d.data.logContext(ctx)
	var items []attr.Value
	err := eachTemplate(ctx, api, templateFilter{NamePrefix: m.NamePrefix, Public: m.Public}, 0, func(t e2b.Template) bool {
		tags, err := api.ListTags(ctx, t.TemplateID)
		if e2bapi.IsNotFound(err) {
			return true // deleted since the list was read
		}
		if err != nil {
			resp.Diagnostics.AddError("Reading the tags of template "+t.TemplateID, err.Error())
			return false
		}
		item, diags := listedTemplate(ctx, t, tags)
		resp.Diagnostics.Append(diags...)
		items = append(items, item)
		return !resp.Diagnostics.HasError()
	})
	if err != nil {
		resp.Diagnostics.AddError("Listing templates", err.Error())
	}
	if resp.Diagnostics.HasError() {
		return
	}
	list, diags := types.ListValue(listedTemplateObject, items)
	resp.Diagnostics.Append(diags...)
	m.Templates = list
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// listedTemplate is an element of templates: t and its tags.
func listedTemplate(ctx context.Context, t e2b.Template, tags []e2b.TemplateTag) (attr.Value, diag.Diagnostics) {
	var diags diag.Diagnostics
	names, d := types.ListValueFrom(ctx, types.StringType, t.Names)
	diags.Append(d...)
	tagNames := make([]string, len(tags))
	defaultBuild := types.StringNull()
	for i, tag := range tags {
		tagNames[i] = tag.Tag
		if tag.Tag == e2b.DefaultTag {
			defaultBuild = types.StringValue(tag.BuildID)
		}
	}
	tagList, d := types.ListValueFrom(ctx, types.StringType, tagNames)
	diags.Append(d...)
	obj, d := types.ObjectValue(listedTemplateObject.AttrTypes, map[string]attr.Value{
		"id": types.StringValue(t.TemplateID), "name": types.StringValue(templateName(t.Aliases, t.Names)),
		"names": names, "public": types.BoolValue(t.Public), "default_build_id": defaultBuild, "tags": tagList,
	})
	diags.Append(d...)
	return obj, diags
}
