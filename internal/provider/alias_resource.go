package provider

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

var (
	_ resource.ResourceWithConfigure   = (*aliasResource)(nil)
	_ resource.ResourceWithImportState = (*aliasResource)(nil)
)

// NewAliasResource is the e2b_alias resource.
func NewAliasResource() resource.Resource { return &aliasResource{} }

type aliasResource struct {
	data *ProviderData
}

type aliasModel struct {
	ID       types.String `tfsdk:"id"`
	Template types.String `tfsdk:"template"`
	Tag      types.String `tfsdk:"tag"`
	BuildID  types.String `tfsdk:"build_id"`
}

func (r *aliasResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_alias"
}

func (r *aliasResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A tag of a template pointing at one build: sandboxes started from `name:tag` run that " +
			"build. Creating or changing it moves the tag in one atomic step (E2B's tags API), so sandboxes " +
			"started from that moment get the new build; a build that is not ready is refused before anything " +
			"moves. Reading it returns the build the tag points at now, so a move made outside Terraform shows " +
			"as a change in the next plan. Destroying it removes the tag.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "`template:tag`.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"template": schema.StringAttribute{
				MarkdownDescription: "Template name (or ID) the tag belongs to.",
				Required:            true,
				Validators:          []validator.String{templateRefValidator()},
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"tag": schema.StringAttribute{
				MarkdownDescription: "The tag: lower-case letters, digits, `-`, `_` and `.`; not `default`, which " +
					"every new build takes over.",
				Required:      true,
				Validators:    []validator.String{aliasTagValidator()},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"build_id": schema.StringAttribute{
				MarkdownDescription: "The build the tag points at (`e2b_template_build.<name>.build_id`); it must be ready.",
				Required:            true,
				Validators:          []validator.String{buildIDValidator()},
			},
		},
	}
}

func (r *aliasResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data, resp.Diagnostics = providerDataFrom(req.ProviderData)
}

// move points the tag at the planned build after checking the build is
// ready.
func (r *aliasResource) move(ctx context.Context, api *e2bapi.Client, m *aliasModel) (ok bool, diags diag.Diagnostics) {
	template, tag, buildID := m.Template.ValueString(), m.Tag.ValueString(), m.BuildID.ValueString()
	templateID, d := resolveTemplateID(ctx, api, template)
	diags.Append(d...)
	if diags.HasError() {
		return false, diags
	}
	info, err := api.GetBuildStatus(ctx, templateID, buildID, math.MaxInt32)
	if e2bapi.IsBuildGone(err) {
		diags.AddAttributeError(path.Root("build_id"), "Build not found",
			fmt.Sprintf("Template %s has no build %s; the tag %q was not moved.", template, buildID, tag))
		return false, diags
	}
	if err != nil {
		diags.AddError("Reading build "+buildID, err.Error())
		return false, diags
	}
	if info.Status != e2bapi.BuildReady {
		diags.AddAttributeError(path.Root("build_id"), "Build not ready",
			fmt.Sprintf("Build %s of template %s is %q, not ready; the tag %q was not moved. "+
				"Sandboxes cannot start from a build that is not ready.", buildID, template, info.Status, tag))
		return false, diags
	}
	out, err := api.AssignTags(ctx, template+":"+buildID, []string{tag})
	if err != nil {
		diags.AddError(fmt.Sprintf("Moving tag %s of %s", tag, template), err.Error())
		return false, diags
	}
	tflog.Info(ctx, "tag moved", map[string]any{"template": template, "tag": tag, "build_id": out.BuildID})
	m.ID = types.StringValue(template + ":" + tag)
	return true, diags
}

func (r *aliasResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.moveToPlan(ctx, req.Plan, &resp.State, &resp.Diagnostics)
}

func (r *aliasResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state aliasModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	api := apiOrError(r.data, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx = r.data.logContext(ctx)
	tags, err := api.ListTags(ctx, state.Template.ValueString())
	if e2bapi.IsNotFound(err) {
		tflog.Warn(ctx, "template no longer exists; removing the tag from the state")
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Reading tags of "+state.Template.ValueString(), err.Error())
		return
	}
	buildID := ""
	for _, t := range tags {
		if t.Tag == state.Tag.ValueString() {
			buildID = t.BuildID
		}
	}
	if buildID == "" {
		tflog.Warn(ctx, "tag no longer exists; removing it from the state", map[string]any{"tag": state.Tag.ValueString()})
		resp.State.RemoveResource(ctx)
		return
	}
	state.BuildID = types.StringValue(buildID)
	state.ID = types.StringValue(state.Template.ValueString() + ":" + state.Tag.ValueString())
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *aliasResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.moveToPlan(ctx, req.Plan, &resp.State, &resp.Diagnostics)
}

// moveToPlan points the tag at the planned build and records it: create and update are
// the same atomic move.
func (r *aliasResource) moveToPlan(ctx context.Context, planned tfsdk.Plan, state *tfsdk.State, diags *diag.Diagnostics) {
	var plan aliasModel
	diags.Append(planned.Get(ctx, &plan)...)
	api := apiOrError(r.data, diags)
	if diags.HasError() {
		return
	}
	ctx = r.data.logContext(ctx)
	ok, moveDiags := r.move(ctx, api, &plan)
	diags.Append(moveDiags...)
	if ok {
		diags.Append(state.Set(ctx, &plan)...)
	}
}

func (r *aliasResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state aliasModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	api := apiOrError(r.data, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx = r.data.logContext(ctx)
	err := api.DeleteTags(ctx, state.Template.ValueString(), []string{state.Tag.ValueString()})
	if err != nil && !e2bapi.IsNotFound(err) {
		resp.Diagnostics.AddError(fmt.Sprintf("Removing tag %s of %s", state.Tag.ValueString(), state.Template.ValueString()), err.Error())
	}
}

// ImportState takes "template:tag".
func (r *aliasResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	i := strings.LastIndex(req.ID, ":")
	if i <= 0 || i == len(req.ID)-1 {
		resp.Diagnostics.AddError("Invalid import ID", fmt.Sprintf("Import ID %q must be template:tag, such as my-template:prod.", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("template"), req.ID[:i])...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("tag"), req.ID[i+1:])...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
}
