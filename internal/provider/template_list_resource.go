package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/list"
	lschema "github.com/hashicorp/terraform-plugin-framework/list/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

var _ list.ListResourceWithConfigure = (*templateListResource)(nil)

// NewTemplateListResource is the e2b_template list resource.
func NewTemplateListResource() list.ListResource { return &templateListResource{} }

type templateListResource struct {
	data *ProviderData
}

func (r *templateListResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_template"
}

func (r *templateListResource) ListResourceConfigSchema(_ context.Context, _ list.ListResourceSchemaRequest, resp *list.ListResourceSchemaResponse) {
	resp.Schema = lschema.Schema{
		MarkdownDescription: "Lists the team's templates (`terraform query`, Terraform 1.14+), page by page as E2B " +
			"lists them, with each one's identity and name, and with `include_resource` the whole `e2b_template`, " +
			"so that `terraform query -generate-config-out` writes its configuration and import block.",
		Attributes: map[string]lschema.Attribute{
			"name_prefix": lschema.StringAttribute{MarkdownDescription: namePrefixDescription, Optional: true},
			"public":      lschema.BoolAttribute{MarkdownDescription: publicFilterDescription, Optional: true},
		},
	}
}

func (r *templateListResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data, resp.Diagnostics = providerDataFrom(req.ProviderData)
}

func (r *templateListResource) List(ctx context.Context, req list.ListRequest, stream *list.ListResultsStream) {
	var filter templateFilter
	stream.Results = listStream(ctx, r.data, req, &filter, "Listing templates",
		func(ctx context.Context, api *e2bapi.Client, push func(list.ListResult) bool) error {
			return eachTemplate(ctx, api, filter, pageSizeFor(req.Limit), func(t e2b.Template) bool {
				return push(templateListResult(ctx, req, t))
			})
		})
}

// templateListResult is t's identity, name and, when asked, its e2b_template as an
// import by ID reads it.
func templateListResult(ctx context.Context, req list.ListRequest, t e2b.Template) list.ListResult {
	result := req.NewListResult(ctx)
	name := templateName(t.Aliases, t.Names)
	result.DisplayName = name
	result.Diagnostics.Append(result.Identity.Set(ctx, templateIdentity{ID: types.StringValue(t.TemplateID)})...)
	if req.IncludeResource {
		names, d := types.ListValueFrom(ctx, types.StringType, t.Names)
		result.Diagnostics.Append(d...)
		result.Diagnostics.Append(result.Resource.Set(ctx, templateModel{
			ID: types.StringValue(t.TemplateID), Name: types.StringValue(name), Public: types.BoolValue(t.Public),
			Names: names, CreatedAt: types.StringValue(t.CreatedAt.UTC().Format(time.RFC3339)),
		})...)
	}
	return result
}
