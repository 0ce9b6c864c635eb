package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

var (
	_ resource.ResourceWithConfigure   = (*templateResource)(nil)
	_ resource.ResourceWithImportState = (*templateResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*templateResource)(nil)
	_ resource.ResourceWithIdentity    = (*templateResource)(nil)
)

// NewTemplateResource is the e2b_template resource.
func NewTemplateResource() resource.Resource { return &templateResource{} }

type templateResource struct {
	data *ProviderData
}

type templateModel struct {
	ID        types.String `tfsdk:"id"`
	Name      types.String `tfsdk:"name"`
	Public    types.Bool   `tfsdk:"public"`
	Names     types.List   `tfsdk:"names"`
	CreatedAt types.String `tfsdk:"created_at"`
}

func (r *templateResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_template"
}

func (r *templateResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "An E2B sandbox template: a name under which builds are made " +
			"(`e2b_template_build`) and tags are moved (`e2b_alias`).\n\n" +
			"E2B registers a template together with its first build. That build waits for the first " +
			"`e2b_template_build` of the template, which runs it, so the template never shows a build that never runs.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "Template ID, chosen by E2B.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "Template name (its alias): lower-case letters, digits, `-` and `_`, optionally " +
					"prefixed with your team's namespace (`team/name`), at most 128 characters, without a tag. " +
					"Sandboxes start from `name` (the build tagged `default`) or `name:tag`. " +
					"E2B cannot rename a template, so a new name replaces it.",
				Required:      true,
				Validators:    []validator.String{templateNameValidator()},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"public": schema.BoolAttribute{
				MarkdownDescription: "Whether every E2B team may start sandboxes from the template. Defaults to `false`.",
				Optional:            true,
				Computed:            true,
				Default:             booldefault.StaticBool(false),
			},
			"names": schema.ListAttribute{
				MarkdownDescription: "Full names E2B knows the template by, such as `team/name`.",
				ElementType:         types.StringType,
				Computed:            true,
			},
			"created_at": schema.StringAttribute{
				MarkdownDescription: "When the template was created (RFC 3339).",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
		},
	}
}

func (r *templateResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = templateIdentitySchema()
}

func (r *templateResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data, resp.Diagnostics = providerDataFrom(req.ProviderData)
}

// ModifyPlan changes no plan: it pairs the template's name with its ID for the default
// tag's plan warning (common_default_tag.go), e2b_alias naming templates by name and
// e2b_template_build by ID.
func (r *templateResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan templateModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	r.data.recordTemplatePlan(plan.Name, plan.ID)
}

func (r *templateResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	defer identityAfterCreate(ctx, resp)
	var plan templateModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	api := apiOrError(r.data, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx = r.data.logContext(ctx)
	name := plan.Name.ValueString()

	// A name E2B already knows would make POST /v3/templates rebuild that
	// template instead of creating one; Terraform must not take over a
	// template it did not create without an import.
	if existing, err := api.GetTemplateByAlias(ctx, name); err == nil {
		resp.Diagnostics.AddAttributeError(path.Root("name"), "Template name already in use",
			fmt.Sprintf("A template named %q already exists (ID %s). Import it with `terraform import` "+
				"(ID or name) or choose another name.", name, existing.TemplateID))
		return
	} else if !e2bapi.IsNotFound(err) {
		resp.Diagnostics.AddError("Checking template name "+name, err.Error())
		return
	}

	reg, err := api.CreateTemplateBuild(ctx, e2b.TemplateBuildRequestV3{Name: name})
	if err != nil {
		resp.Diagnostics.AddError("Creating template "+name, err.Error())
		return
	}
	tflog.Info(ctx, "template registered", map[string]any{"template_id": reg.TemplateID, "waiting_build_id": reg.BuildID})
	plan.ID = types.StringValue(reg.TemplateID)
	// Keep the ID even if what follows fails, so the template is not lost.
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), reg.TemplateID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)

	if plan.Public.ValueBool() != reg.Public {
		public := plan.Public.ValueBool()
		if _, err := api.UpdateTemplate(ctx, reg.TemplateID, e2b.TemplateUpdateRequest{Public: &public}); err != nil {
			resp.Diagnostics.AddError("Setting public on template "+name, err.Error())
			return
		}
	}
	resp.Diagnostics.Append(r.read(ctx, api, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// read fills m from the API; it returns found=false through m.ID being null
// when the template is gone.
func (r *templateResource) read(ctx context.Context, api *e2bapi.Client, m *templateModel) (diags diag.Diagnostics) {
	t, err := api.GetTemplate(ctx, m.ID.ValueString())
	if e2bapi.IsNotFound(err) {
		m.ID = types.StringNull()
		return nil
	}
	if err != nil {
		diags.AddError("Reading template "+m.ID.ValueString(), err.Error())
		return diags
	}
	m.Public = types.BoolValue(t.Public)
	names, d := types.ListValueFrom(ctx, types.StringType, t.Names)
	diags.Append(d...)
	m.Names = names
	m.CreatedAt = types.StringValue(t.CreatedAt.UTC().Format(time.RFC3339))
	// A rename made outside Terraform shows as drift; a name given with
	// or without the namespace matches either form.
	if len(t.Names) > 0 && !nameMatches(m.Name.ValueString(), t.Names) {
		if len(t.Aliases) > 0 {
			m.Name = types.StringValue(t.Aliases[0])
		} else {
			m.Name = types.StringValue(t.Names[0])
		}
	}
	return diags
}

// nameMatches reports whether name ("alias" or "namespace/alias") is one
// of the template's full names.
func nameMatches(name string, names []string) bool {
	for _, n := range names {
		if n == name || strings.HasSuffix(n, "/"+name) {
			return true
		}
	}
	return false
}

func (r *templateResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	defer identityAfterRead(ctx, req, resp)
	var state templateModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	api := apiOrError(r.data, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx = r.data.logContext(ctx)
	resp.Diagnostics.Append(r.read(ctx, api, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if state.ID.IsNull() {
		tflog.Warn(ctx, "template no longer exists; removing it from the state")
		resp.State.RemoveResource(ctx)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *templateResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	defer identityAfterUpdate(ctx, resp)
	var plan, state templateModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	api := apiOrError(r.data, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx = r.data.logContext(ctx)
	plan.ID = state.ID
	if !plan.Public.Equal(state.Public) {
		public := plan.Public.ValueBool()
		if _, err := api.UpdateTemplate(ctx, state.ID.ValueString(), e2b.TemplateUpdateRequest{Public: &public}); err != nil {
			resp.Diagnostics.AddError("Updating template "+state.Name.ValueString(), err.Error())
			return
		}
	}
	resp.Diagnostics.Append(r.read(ctx, api, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if plan.ID.IsNull() {
		resp.Diagnostics.AddError("Template disappeared", fmt.Sprintf("Template %s was deleted while it was being updated.", state.ID.ValueString()))
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *templateResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state templateModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	api := apiOrError(r.data, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx = r.data.logContext(ctx)
	err := api.DeleteTemplate(ctx, state.ID.ValueString())
	switch {
	case err == nil, e2bapi.IsNotFound(err):
	case e2bapi.IsInvalid(err):
		resp.Diagnostics.AddError("Cannot delete template "+state.Name.ValueString(),
			fmt.Sprintf("E2B refused to delete template %s, usually because sandboxes still run from it: %v. "+
				"Kill those sandboxes and apply again.", state.ID.ValueString(), err))
	default:
		resp.Diagnostics.AddError("Deleting template "+state.Name.ValueString(), err.Error())
	}
}

// ImportState takes a template ID or name, as the import ID or the identity's id.
func (r *templateResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	defer identityAfterImport(ctx, resp)
	ref := req.ID
	var identity templateIdentity
	if importedIdentity(ctx, req, &identity, &resp.Diagnostics) {
		ref = identity.ID.ValueString()
	}
	api := apiOrError(r.data, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx = r.data.logContext(ctx)
	id, diags := resolveTemplateID(ctx, api, ref)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	t, err := api.GetTemplate(ctx, id)
	if err != nil {
		resp.Diagnostics.AddError("Importing template "+ref, err.Error())
		return
	}
	// Imported by name: keep it as written. By ID: take the template's.
	name := ref
	if ref == id {
		name = templateName(t.Aliases, t.Names)
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), id)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
}

// resolveTemplateID turns a template ID or name into the ID: a string
// shaped like an ID is tried as one first, since an alias may look the same.
func resolveTemplateID(ctx context.Context, api *e2bapi.Client, ref string) (string, diag.Diagnostics) {
	var diags diag.Diagnostics
	id, err := readTemplateID(ctx, api, ref)
	switch {
	case e2bapi.IsNotFound(err):
		diags.AddError("Template not found", templateNotFound(ref))
	case err != nil:
		diags.AddError("Resolving template "+ref, err.Error())
	}
	return id, diags
}

// readTemplateID is resolveTemplateID's lookup; a template nothing answers to is
// e2bapi.IsNotFound.
func readTemplateID(ctx context.Context, api *e2bapi.Client, ref string) (string, error) {
	if e2b.IsTemplateID(ref) {
		_, err := api.GetTemplate(ctx, ref)
		if err == nil || !e2bapi.IsNotFound(err) {
			return ref, err
		}
	}
	a, err := api.GetTemplateByAlias(ctx, ref)
	if err != nil {
		return "", err
	}
	return a.TemplateID, nil
}

// templateNotFound is the error detail of a template reference nothing
// answers to, with how to check.
func templateNotFound(ref string) string {
	return fmt.Sprintf("No template has the ID or name %q, or it belongs to another team and is not public. "+
		"Check the spelling and that the API key is of the team that owns it: the E2B CLI's `e2b template list` "+
		"lists the templates that team has; another team's template must be public to be used.", ref)
}
