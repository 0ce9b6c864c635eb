package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/list"
	lschema "github.com/hashicorp/terraform-plugin-framework/list/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/templatebuild"
)

var _ list.ListResourceWithConfigure = (*templateBuildListResource)(nil)

// NewTemplateBuildListResource is the e2b_template_build list resource.
func NewTemplateBuildListResource() list.ListResource { return &templateBuildListResource{} }

type templateBuildListResource struct {
	data *ProviderData
}

type templateBuildListModel struct {
	Template types.String `tfsdk:"template"`
}

func (r *templateBuildListResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_template_build"
}

func (r *templateBuildListResource) ListResourceConfigSchema(_ context.Context, _ list.ListResourceSchemaRequest, resp *list.ListResourceSchemaResponse) {
	resp.Schema = lschema.Schema{
		MarkdownDescription: "Lists the builds of one template (`terraform query`, Terraform 1.14+), newest first as " +
			"E2B answers them, page by page: each one's identity and a display name with its status, tags and " +
			"creation time, and with `include_resource` the `e2b_template_build` an import reads, so that " +
			"`terraform query -generate-config-out` writes its import block. Failed builds and builds registered " +
			"but never started are left out: a refresh removes them from the state, so they cannot be imported.",
		Attributes: map[string]lschema.Attribute{
			"template": lschema.StringAttribute{
				MarkdownDescription: "Template name (or ID) whose builds to list.",
				Required:            true,
				Validators:          []validator.String{templateRefValidator()},
			},
		},
	}
}

func (r *templateBuildListResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data, resp.Diagnostics = providerDataFrom(req.ProviderData)
}

func (r *templateBuildListResource) List(ctx context.Context, req list.ListRequest, stream *list.ListResultsStream) {
	var config templateBuildListModel
	stream.Results = listStream(ctx, r.data, req, &config, "Listing builds",
		func(ctx context.Context, api *e2bapi.Client, push func(list.ListResult) bool) error {
			template := config.Template.ValueString()
			templateID, err := readTemplateID(ctx, api, template)
			if e2bapi.IsNotFound(err) {
				return errors.New(templateNotFound(template))
			}
			if err != nil {
				return err
			}
			tags, err := api.ListTags(ctx, templateID)
			if err != nil {
				return fmt.Errorf("tags of template %s: %w", template, err)
			}
			tagsOf := map[string][]string{}
			for _, t := range tags {
				tagsOf[t.BuildID] = append(tagsOf[t.BuildID], t.Tag)
			}
			for b, err := range api.TemplateBuilds(ctx, templateID, pageSizeFor(req.Limit)) {
				if err != nil {
					return fmt.Errorf("builds of template %s: %w", template, err)
				}
				if b.Status != e2b.BuildReady && b.Status != e2b.BuildBuilding {
					continue
				}
				if !push(buildListResult(ctx, req, template, templateID, b, tagsOf[b.BuildID])) {
					return nil
				}
			}
			return nil
		})
}

// buildListResult is the list result of build b of the template templateID, named as
// template, which carries tags.
func buildListResult(ctx context.Context, req list.ListRequest, template, templateID string, b e2b.TemplateBuild, tags []string) list.ListResult {
	result := req.NewListResult(ctx)
	tagged := "no tags"
	if len(tags) > 0 {
		tagged = "tags " + strings.Join(tags, ", ")
	}
	result.DisplayName = fmt.Sprintf("%s:%s (%s; %s; created %s)", template, b.BuildID, b.Status, tagged, b.CreatedAt.UTC().Format(time.RFC3339))
	result.Diagnostics.Append(result.Identity.Set(ctx, buildIdentity{
		TemplateID: types.StringValue(templateID), BuildID: types.StringValue(b.BuildID),
	})...)
	if req.IncludeResource {
		// What ImportState and the first Read leave in the state; the first apply of the
		// generated configuration adopts the build or replaces it (template_build_import.go).
		for name, value := range map[string]any{
			"template_id": templateID, "build_id": b.BuildID, "id": b.BuildID, "status": b.Status,
			"files_hash": templatebuild.HashPortable, "force": false, "reuse": false,
		} {
			result.Diagnostics.Append(result.Resource.SetAttribute(ctx, path.Root(name), value)...)
		}
	}
	return result
}
