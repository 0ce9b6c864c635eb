package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/sandboxrun"
)

// defaultAliasTimeout bounds a tag move, its gate included.
const defaultAliasTimeout = 20 * time.Minute

var (
	_ resource.ResourceWithConfigure      = (*aliasResource)(nil)
	_ resource.ResourceWithImportState    = (*aliasResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*aliasResource)(nil)
	_ resource.ResourceWithValidateConfig = (*aliasResource)(nil)
	_ resource.ResourceWithIdentity       = (*aliasResource)(nil)
)

// NewAliasResource is the e2b_alias resource.
func NewAliasResource() resource.Resource { return &aliasResource{} }

type aliasResource struct {
	data *ProviderData
}

type aliasModel struct {
	ID       types.String   `tfsdk:"id"`
	Template types.String   `tfsdk:"template"`
	Tag      types.String   `tfsdk:"tag"`
	BuildID  types.String   `tfsdk:"build_id"`
	Gate     *commandModel  `tfsdk:"gate"`
	Timeouts timeouts.Value `tfsdk:"timeouts"`
}

func (r *aliasResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_alias"
}

func (r *aliasResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A tag of a template pointing at one build: sandboxes started from `name:tag` run that " +
			"build. Creating or changing it moves the tag in one atomic step (E2B's tags API), so sandboxes " +
			"started from that moment get the new build; a build that is not ready is refused before anything " +
			"moves. With a `gate`, the move waits for a command that must pass in a new sandbox of the build. " +
			"Reading it returns the build sandboxes started from `name:tag` run now (the tag's newest ready " +
			"build), so a move made outside Terraform shows as a change in the next plan. While the tag's newest " +
			"build is not ready (a build registered with the tag is in progress, or failed), sandboxes still run " +
			"an earlier build, which E2B's API does not name, so reading keeps `build_id` as it was; a tag that no " +
			"longer resolves to any ready build is gone from the state, and the plan creates it again. Destroying it removes the tag, except `default`, which E2B keeps: " +
			"destroying an alias on `default` only forgets it.\n\n" +
			"`tag = \"default\"` promotes the build that `Sandbox.create(\"name\")` starts. E2B also points " +
			"`default` at every new build that has no tags (`e2b_template_build` without `tags`), bypassing the " +
			"alias and its gate: the plan warns when it sees such a build of the same template in the " +
			"configuration (for templates that exist already, through this provider configuration).",
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
				MarkdownDescription: "The tag: lower-case letters, digits, `-`, `_` and `.`. `default` is the build " +
					"sandboxes started from the bare template name run.",
				Required:      true,
				Validators:    []validator.String{tagValidator()},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"build_id": schema.StringAttribute{
				MarkdownDescription: "The build the tag points at (`e2b_template_build.<name>.build_id`); it must be ready.",
				Required:            true,
				Validators:          []validator.String{buildIDValidator()},
			},
			"gate": schema.SingleNestedAttribute{
				MarkdownDescription: "A release gate: when the alias is created or `build_id` changes, this command runs " +
					"in a new sandbox from the new build (killed afterwards, also on failure and timeout) before the tag " +
					"moves. A non-zero exit stops the move with the command's stderr, and the tag stays where it was. " +
					"It never runs during plan or refresh, and changing only the gate runs nothing.",
				Optional: true,
				Attributes: map[string]schema.Attribute{
					"command": schema.StringAttribute{
						MarkdownDescription: commandDescription,
						Optional:            true,
						Validators:          []validator.String{stringvalidator.ExactlyOneOf(path.MatchRelative().AtParent().AtName("cmd"))},
					},
					"cmd":     schema.StringAttribute{MarkdownDescription: commandCmdDescription, Optional: true},
					"args":    schema.ListAttribute{MarkdownDescription: commandArgsDescription, Optional: true, ElementType: types.StringType},
					"env":     schema.MapAttribute{MarkdownDescription: commandEnvDescription, Optional: true, ElementType: types.StringType},
					"cwd":     schema.StringAttribute{MarkdownDescription: commandCwdDescription, Optional: true},
					"user":    schema.StringAttribute{MarkdownDescription: commandUserDescription, Optional: true},
					"timeout": schema.StringAttribute{MarkdownDescription: commandTimeoutDescription, Optional: true, Validators: []validator.String{durationValidator(processTimeoutRange)}},
				},
			},
			"timeouts": timeouts.Attributes(ctx, timeouts.Opts{Create: true, Update: true,
				CreateDescription: "How long creating the alias may take, its gate included, from `1s` to `24h` (default `20m`); the tag does not move when it elapses.",
				UpdateDescription: "How long moving the tag may take, its gate included, from `1s` to `24h` (default `20m`); the tag does not move when it elapses.",
			}),
		},
	}
}

func (r *aliasResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = aliasIdentitySchema()
}

func (r *aliasResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data, resp.Diagnostics = providerDataFrom(req.ProviderData)
}

// ValidateConfig checks the timeouts' range and the gate's arguments (runRequest), so
// that a bad gate fails the plan, not the apply after the builds.
func (r *aliasResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	resp.Diagnostics.Append(validateTimeouts(ctx, req.Config, processTimeoutRange, "create", "update")...)
	var gate *commandModel
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("gate"), &gate)...)
	if gate != nil {
		_, d := gate.runRequest(ctx, path.Root("gate"))
		resp.Diagnostics.Append(d...)
	}
}

// ModifyPlan changes no plan: it records an alias on default for the plan warning of
// common_default_tag.go, and checks that a new build_id, when known, is a build of the
// template when the template exists (checkAliasBuildAtPlan).
func (r *aliasResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan aliasModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(r.data.recordAliasPlan(plan.Template, plan.Tag)...)
	if resp.Diagnostics.HasError() || plan.Template.IsUnknown() || plan.BuildID.IsUnknown() {
		return
	}
	var prior types.String
	if !req.State.Raw.IsNull() {
		resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("build_id"), &prior)...)
	}
	if !plan.BuildID.Equal(prior) {
		resp.Diagnostics.Append(checkAliasBuildAtPlan(ctx, r.data, plan.Template.ValueString(), plan.BuildID.ValueString())...)
	}
}

func (r *aliasResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	defer identityAfterCreate(ctx, resp)
	var plan aliasModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, d := plan.Timeouts.Create(ctx, defaultAliasTimeout)
	resp.Diagnostics.Append(d...)
	if r.promote(ctx, &plan, "create", timeout, &resp.Diagnostics) {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	}
}

func (r *aliasResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	defer identityAfterRead(ctx, req, resp)
	var state aliasModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	api := apiOrError(r.data, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx = r.data.logContext(ctx)
	template, tag := state.Template.ValueString(), state.Tag.ValueString()
	templateID, err := readTemplateID(ctx, api, template)
	if e2bapi.IsNotFound(err) {
		tflog.Warn(ctx, "template no longer exists; removing the tag from the state")
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Resolving template "+template, err.Error())
		return
	}
	res, err := api.ResolveTag(ctx, templateID, tag)
	if err != nil {
		resp.Diagnostics.AddError("Reading tags of "+template, err.Error())
		return
	}
	switch {
	case res.BuildID != "":
		// What sandboxes start: a move outside Terraform shows as a change.
		state.BuildID = types.StringValue(res.BuildID)
	case res.Earlier:
		// The tag's newest build is in progress or failed; sandboxes still run an earlier
		// ready build, which the API does not name: the state keeps its build until the
		// newer one is ready (then it shows as a change).
		tflog.Warn(ctx, "the tag was given to a build that is not ready; keeping the build in the state", map[string]any{
			"tag": tag, "listed_build_id": res.Listed.BuildID, "listed_status": res.ListedStatus,
		})
	default:
		tflog.Warn(ctx, "the tag no longer resolves to a ready build; removing it from the state", map[string]any{"tag": tag})
		resp.State.RemoveResource(ctx)
		return
	}
	state.ID = types.StringValue(state.Template.ValueString() + ":" + state.Tag.ValueString())
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Update moves the tag, after the gate, when build_id changed; a change of the gate or
// the timeouts alone is only recorded.
func (r *aliasResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	defer identityAfterUpdate(ctx, resp)
	var plan, state aliasModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !plan.BuildID.Equal(state.BuildID) {
		timeout, d := plan.Timeouts.Update(ctx, defaultAliasTimeout)
		resp.Diagnostics.Append(d...)
		if !r.promote(ctx, &plan, "update", timeout, &resp.Diagnostics) {
			return
		}
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// promote points the tag at the planned build, after its gate (sandboxrun.Promote),
// within timeout (timeouts.<operation>), and reports whether it moved.
func (r *aliasResource) promote(ctx context.Context, m *aliasModel, operation string, timeout time.Duration, diags *diag.Diagnostics) bool {
	api := apiOrError(r.data, diags)
	if diags.HasError() {
		return false
	}
	ctx = r.data.logContext(ctx)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	template, tag, buildID := m.Template.ValueString(), m.Tag.ValueString(), m.BuildID.ValueString()
	templateID, d := resolveTemplateID(ctx, api, template)
	diags.Append(d...)
	if diags.HasError() {
		return false
	}
	req := sandboxrun.PromoteRequest{Template: template, TemplateID: templateID, Tag: tag, BuildID: buildID}
	if m.Gate != nil {
		run, d := m.Gate.runRequest(ctx, path.Root("gate"))
		if diags.Append(d...); diags.HasError() {
			return false
		}
		req.Gate = &run
	}
	res, err := sandboxrun.Promote(ctx, api, req, sandboxrun.Options{
		Connect: r.data.Envd,
		Logger:  tflogLogger{},
		Secret:  func(ctx context.Context, token string) context.Context { return tflog.MaskMessageStrings(ctx, token) },
	})
	addRunWarnings(diags, res)
	var runErr *sandboxrun.Error
	switch {
	case err == nil:
		m.ID = types.StringValue(template + ":" + tag)
		return true
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		diags.AddError("Tag not moved in time", fmt.Sprintf("timeouts.%s (%s) elapsed before tag %q of %s was moved to build %s; "+
			"the tag was not moved. %v", operation, timeout, tag, template, buildID, err))
	case errors.As(err, &runErr) && runErr.Stage == sandboxrun.StageBuild && e2bapi.IsBuildGone(err):
		diags.AddAttributeError(path.Root("build_id"), "Build not found", err.Error())
	case errors.As(err, &runErr) && runErr.Stage == sandboxrun.StageBuild:
		diags.AddAttributeError(path.Root("build_id"), "Build not usable", err.Error())
	case errors.As(err, &runErr) && runErr.Stage == sandboxrun.StageGate:
		diags.AddAttributeError(path.Root("gate"), "Gate failed", err.Error())
	case errors.As(err, &runErr) && runErr.Stage == sandboxrun.StageMove:
		diags.AddError(fmt.Sprintf("Moving tag %s of %s", tag, template), err.Error())
	default:
		diags.AddAttributeError(path.Root("gate"), "Gate did not run to the end",
			fmt.Sprintf("%v\n\nThe tag %q was not moved.", err, tag))
	}
	return false
}

// Delete removes the tag; default, which E2B does not delete, is only forgotten.
func (r *aliasResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state aliasModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if state.Tag.ValueString() == e2b.DefaultTag {
		tflog.Info(ctx, "alias on default removed from the state only: E2B keeps a template's default tag",
			map[string]any{"template": state.Template.ValueString()})
		return
	}
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

// ImportState takes "template:tag", or the identity's template and tag.
func (r *aliasResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	defer identityAfterImport(ctx, resp)
	var identity aliasIdentity
	if !importedIdentity(ctx, req, &identity, &resp.Diagnostics) {
		i := strings.LastIndex(req.ID, ":")
		if i <= 0 || i == len(req.ID)-1 {
			resp.Diagnostics.AddError("Invalid import ID", fmt.Sprintf("Import ID %q must be template:tag, such as my-template:prod.", req.ID))
			return
		}
		identity = aliasIdentity{Template: types.StringValue(req.ID[:i]), Tag: types.StringValue(req.ID[i+1:])}
	} else if identity.Template.ValueString() == "" || identity.Tag.ValueString() == "" {
		resp.Diagnostics.AddError("Invalid import identity", "The identity of an e2b_alias needs a template and a tag, such as { template = \"my-template\", tag = \"prod\" }.")
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("template"), identity.Template)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("tag"), identity.Tag)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), identity.Template.ValueString()+":"+identity.Tag.ValueString())...)
}
