package provider

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/list"
	lschema "github.com/hashicorp/terraform-plugin-framework/list/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

var _ list.ListResourceWithConfigure = (*aliasListResource)(nil)

// NewAliasListResource is the e2b_alias list resource.
func NewAliasListResource() list.ListResource { return &aliasListResource{} }

type aliasListResource struct {
	data *ProviderData
}

type aliasListModel struct {
	Template types.String `tfsdk:"template"`
}

func (r *aliasListResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_alias"
}

func (r *aliasListResource) ListResourceConfigSchema(_ context.Context, _ list.ListResourceSchemaRequest, resp *list.ListResourceSchemaResponse) {
	resp.Schema = lschema.Schema{
		MarkdownDescription: "Lists the tags of one template, or of every template of the team (`terraform query`, " +
			"Terraform 1.14+), with each one's identity and `template:tag`, and with `include_resource` the whole " +
			"`e2b_alias` (without a gate), so that `terraform query -generate-config-out` writes its configuration " +
			"and import block. A tag whose newest build is not ready is left out: E2B's API does not name the build " +
			"it serves meanwhile, so it cannot be imported yet.",
		Attributes: map[string]lschema.Attribute{
			"template": lschema.StringAttribute{
				MarkdownDescription: "Template name (or ID) whose tags to list; every template's when unset.",
				Optional:            true,
				Validators:          []validator.String{templateRefValidator()},
			},
		},
	}
}

func (r *aliasListResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data, resp.Diagnostics = providerDataFrom(req.ProviderData)
}

func (r *aliasListResource) List(ctx context.Context, req list.ListRequest, stream *list.ListResultsStream) {
	var config aliasListModel
	stream.Results = listStream(ctx, r.data, req, &config, "Listing tags",
		func(ctx context.Context, api *e2bapi.Client, push func(list.ListResult) bool) error {
			var failed error
			// each pushes the importable tags of one template, named as template, and
			// reports whether the list goes on.
			each := func(templateID, template string) bool {
				results, err := aliasListResults(ctx, api, req, templateID, template)
				if e2bapi.IsNotFound(err) && config.Template.IsNull() {
					return true // deleted since the template list was read
				}
				if err != nil {
					failed = fmt.Errorf("tags of template %s: %w", template, err)
					return false
				}
				for _, result := range results {
					if !push(result) {
						return false
					}
				}
				return true
			}
			if template := config.Template.ValueString(); template != "" {
				templateID, err := readTemplateID(ctx, api, template)
				if e2bapi.IsNotFound(err) {
					return errors.New(templateNotFound(template))
				}
				if err != nil {
					return err
				}
				each(templateID, template)
				return failed
			}
			if err := eachTemplate(ctx, api, templateFilter{}, 0, func(t e2b.Template) bool {
				return each(t.TemplateID, templateName(t.Aliases, t.Names))
			}); err != nil {
				return err
			}
			return failed
		})
}

// aliasListResults are the list results of the tags of the template templateID whose
// newest build is ready (what e2b_alias reads), with the template named as template.
func aliasListResults(ctx context.Context, api *e2bapi.Client, req list.ListRequest, templateID, template string) ([]list.ListResult, error) {
	tags, err := api.ListTags(ctx, templateID)
	if err != nil {
		return nil, err
	}
	ready := map[string]bool{}
	var results []list.ListResult
	for _, tag := range tags {
		isReady, seen := ready[tag.BuildID]
		if !seen {
			info, err := api.GetBuildStatus(ctx, templateID, tag.BuildID, math.MaxInt32)
			if err != nil && !e2bapi.IsBuildGone(err) {
				return nil, err
			}
			isReady = err == nil && info.Status == e2b.BuildReady
			ready[tag.BuildID] = isReady
		}
		if !isReady {
			continue
		}
		result := req.NewListResult(ctx)
		result.DisplayName = template + ":" + tag.Tag
		identity := aliasIdentity{Template: types.StringValue(template), Tag: types.StringValue(tag.Tag)}
		result.Diagnostics.Append(result.Identity.Set(ctx, identity)...)
		if req.IncludeResource {
			result.Diagnostics.Append(result.Resource.Set(ctx, aliasModel{
				ID: types.StringValue(result.DisplayName), Template: identity.Template, Tag: identity.Tag,
				BuildID: types.StringValue(tag.BuildID),
				// Unset, as the generated configuration leaves them.
				Timeouts: timeouts.Value{Object: types.ObjectNull(map[string]attr.Type{"create": types.StringType, "update": types.StringType})},
			})...)
		}
		results = append(results, result)
	}
	return results, nil
}
