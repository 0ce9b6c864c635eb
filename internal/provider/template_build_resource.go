package provider

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/resourcevalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/templatebuild"
)

// defaultBuildTimeout is how long e2b_template_build waits for a build.
const defaultBuildTimeout = 60 * time.Minute

var (
	_ resource.ResourceWithConfigure        = (*templateBuildResource)(nil)
	_ resource.ResourceWithImportState      = (*templateBuildResource)(nil)
	_ resource.ResourceWithModifyPlan       = (*templateBuildResource)(nil)
	_ resource.ResourceWithConfigValidators = (*templateBuildResource)(nil)
	_ resource.ResourceWithValidateConfig   = (*templateBuildResource)(nil)
	_ resource.ResourceWithIdentity         = (*templateBuildResource)(nil)
)

// NewTemplateBuildResource is the e2b_template_build resource.
func NewTemplateBuildResource() resource.Resource { return &templateBuildResource{} }

type templateBuildResource struct {
	data *ProviderData
}

type templateBuildModel struct {
	ID                types.String   `tfsdk:"id"`
	BuildID           types.String   `tfsdk:"build_id"`
	TemplateID        types.String   `tfsdk:"template_id"`
	FromImage         types.String   `tfsdk:"from_image"`
	FromImageRegistry *registryModel `tfsdk:"from_image_registry"`
	FromTemplate      types.String   `tfsdk:"from_template"`
	Dockerfile        types.String   `tfsdk:"dockerfile"`
	BuildArgs         types.Map      `tfsdk:"build_args"`
	Context           types.String   `tfsdk:"context"`
	Steps             types.List     `tfsdk:"steps"`
	StartCmd          types.String   `tfsdk:"start_cmd"`
	ReadyCmd          types.String   `tfsdk:"ready_cmd"`
	CPUCount          types.Int64    `tfsdk:"cpu_count"`
	MemoryMB          types.Int64    `tfsdk:"memory_mb"`
	Tags              types.Set      `tfsdk:"tags"`
	Force             types.Bool     `tfsdk:"force"`
	Reuse             types.Bool     `tfsdk:"reuse"`
	FilesHash         types.String   `tfsdk:"files_hash"`
	Triggers          types.Map      `tfsdk:"triggers"`
	CopyHashes        types.List     `tfsdk:"copy_hashes"`
	DockerfileHash    types.String   `tfsdk:"dockerfile_hash"`
	SpecHash          types.String   `tfsdk:"spec_hash"`
	Status            types.String   `tfsdk:"status"`
	Timeouts          timeouts.Value `tfsdk:"timeouts"`
}

func (r *templateBuildResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_template_build"
}

func (r *templateBuildResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: templateBuildDescription,
		Attributes: joinAttributes(
			buildBaseAttributes(),
			map[string]schema.Attribute{"steps": stepsAttribute()},
			buildSandboxAttributes(),
			buildControlAttributes(),
			buildResultAttributes(),
			map[string]schema.Attribute{"timeouts": buildTimeoutsAttribute(ctx)},
		),
	}
}

func (r *templateBuildResource) ConfigValidators(context.Context) []resource.ConfigValidator {
	return []resource.ConfigValidator{
		resourcevalidator.ExactlyOneOf(path.MatchRoot("from_image"), path.MatchRoot("from_template"), path.MatchRoot("dockerfile")),
		resourcevalidator.Conflicting(path.MatchRoot("from_image_registry"), path.MatchRoot("from_template")),
		resourcevalidator.Conflicting(path.MatchRoot("from_image_registry"), path.MatchRoot("dockerfile")),
	}
}

// ValidateConfig checks the range of timeouts.create and timeouts.update, which the
// timeouts package only parses (a negative one returned at once).
func (r *templateBuildResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	resp.Diagnostics.Append(validateTimeouts(ctx, req.Config, buildTimeoutRange, "create", "update")...)
}

func (r *templateBuildResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = buildIdentitySchema()
}

func (r *templateBuildResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data, resp.Diagnostics = providerDataFrom(req.ProviderData)
}

func (r *templateBuildResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return // destroy
	}
	var plan templateBuildModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	var state *templateBuildModel
	if !req.State.Raw.IsNull() {
		state = &templateBuildModel{}
		resp.Diagnostics.Append(req.State.Get(ctx, state)...)
	}
	if resp.Diagnostics.HasError() {
		return
	}
	hashes, dockerfileHash, specHash := types.ListUnknown(types.StringType), types.StringUnknown(), types.StringUnknown()
	b := planBuild(ctx, &plan, &resp.Diagnostics)
	if b != nil {
		var d diag.Diagnostics
		hashes, d = types.ListValueFrom(ctx, types.StringType, b.Hashes())
		resp.Diagnostics.Append(d...)
		dockerfileHash = optionalString(b.DockerfileHash)
		if fullyKnown(ctx, plan.Triggers) {
			specHash = types.StringValue(b.SpecHash)
		}
	}
	if resp.Diagnostics.HasError() {
		return
	}
	if state != nil && state.DockerfileHash.IsNull() && !dockerfileHash.IsNull() && plan.Dockerfile.Equal(state.Dockerfile) {
		// A state written before dockerfile_hash existed: the same Dockerfile argument
		// is taken as the same build, as it was then.
		dockerfileHash = state.DockerfileHash
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("copy_hashes"), hashes)...)
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("dockerfile_hash"), dockerfileHash)...)
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("spec_hash"), specHash)...)
	if state == nil {
		resp.Diagnostics.Append(r.data.recordBuildPlan(plan.TemplateID, plan.Tags)...)
		// A create, also the one of a replacement (planned again without the state).
		if b != nil && !specHash.IsUnknown() && !plan.TemplateID.IsUnknown() {
			r.planAdoption(b, resp)
			r.planReuse(ctx, b, resp)
		}
		return
	}
	planChange(ctx, &plan, state, hashes, dockerfileHash, specHash, req.Private, resp)
}

// errStateNotSaved stops a run whose build ID could not be saved in the state.
var errStateNotSaved = errors.New("the build ID could not be saved in the state")

func (r *templateBuildResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	defer identityAfterCreate(ctx, resp)
	var plan templateBuildModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	runner := runnerOrError(r.data, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx = r.data.logContext(ctx)
	timeout, d := plan.Timeouts.Create(ctx, defaultBuildTimeout)
	resp.Diagnostics.Append(d...)
	b := applyBuild(ctx, &plan, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	if b == nil {
		resp.Diagnostics.AddError("Build configuration not known", "A value of the build is still unknown during apply; this is a bug in Terraform or the provider.")
		return
	}
	if resp.Diagnostics.Append(addWriteOnlySecrets(ctx, req.Config, b.Start.FromImageRegistry)...); resp.Diagnostics.HasError() {
		return
	}
	plan.CopyHashes, d = types.ListValueFrom(ctx, types.StringType, b.Hashes())
	resp.Diagnostics.Append(d...)
	plan.DockerfileHash = optionalString(b.DockerfileHash)
	plan.SpecHash = types.StringValue(b.SpecHash)

	opts := runOptions(ctx, timeout, func(buildID string) error {
		plan.ID, plan.BuildID, plan.Status = types.StringValue(buildID), types.StringValue(buildID), types.StringValue(e2b.BuildBuilding)
		// Saved before waiting: an apply that stops now still tracks the build.
		if resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...); resp.Diagnostics.HasError() {
			return errStateNotSaved
		}
		return nil
	})
	var left string
	if !plan.BuildID.IsUnknown() {
		opts.Reuse = plan.BuildID.ValueString() // the build the plan showed
	} else {
		left = r.data.leftRunning.take(b.TemplateID, b.SpecHash)
	}
	var res templatebuild.Result
	var err error
	if left != "" {
		// The build this resource's tainted object left running: waited for, not built again.
		tflog.Info(ctx, "adopting the build an earlier apply left running instead of building again", map[string]any{"build_id": left})
		if err = opts.Started(left); err == nil {
			res.BuildID = left
			res.Status, err = runner.Wait(ctx, b.TemplateID, left, b.Tags, opts)
		}
	} else {
		res, err = runner.Run(ctx, b, opts)
	}
	if errors.Is(err, errStateNotSaved) {
		return
	}
	addRunError(&resp.Diagnostics, err, plan.TemplateID.ValueString(), res.BuildID)
	if res.BuildID == "" {
		return
	}
	plan.ID, plan.BuildID, plan.Status = types.StringValue(res.BuildID), types.StringValue(res.BuildID), types.StringValue(res.Status)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *templateBuildResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	defer identityAfterRead(ctx, req, resp)
	var state templateBuildModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	api := apiOrError(r.data, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx = r.data.logContext(ctx)
	info, err := api.GetBuildStatus(ctx, state.TemplateID.ValueString(), state.BuildID.ValueString(),
		math.MaxInt32)
	if e2bapi.IsBuildGone(err) {
		tflog.Warn(ctx, "build no longer exists; removing it from the state", map[string]any{"build_id": state.BuildID.ValueString()})
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Reading build "+state.BuildID.ValueString(), err.Error())
		return
	}
	switch info.Status {
	case e2b.BuildError:
		// A build that failed after its apply stopped waiting: the next apply makes a new one.
		tflog.Warn(ctx, "build failed; removing it from the state so that the next apply builds again", map[string]any{"build_id": state.BuildID.ValueString()})
		resp.State.RemoveResource(ctx)
		return
	case e2b.BuildWaiting:
		// Registered but never started (an apply stopped in between): nothing will ever run it.
		resp.State.RemoveResource(ctx)
		return
	}
	if info.Status == e2b.BuildBuilding && r.data != nil {
		// Maybe a tainted object, which the plan replaces: see planAdoption.
		r.data.leftRunning.record(state.TemplateID.ValueString(), state.SpecHash.ValueString(), state.BuildID.ValueString())
	}
	state.Status = types.StringValue(info.Status)
	state.ID = state.BuildID
	if state.CopyHashes.IsUnknown() {
		state.CopyHashes = types.ListNull(types.StringType)
	}
	if state.DockerfileHash.IsUnknown() {
		state.DockerfileHash = types.StringNull()
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Update changes nothing on E2B but the tags (every other argument replaces the build):
// it waits for a build an earlier apply left running, with reuse tags the ready build
// with its spec tag, which it lacks when reuse was turned on later, and gives an imported
// build the plan adopted its tags and its planned hashes.
func (r *templateBuildResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	defer identityAfterUpdate(ctx, resp)
	var plan, state templateBuildModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	_, adopting := importedMark(ctx, req.Private, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.ID, plan.BuildID, plan.Status = state.ID, state.BuildID, state.Status
	if adopting {
		resp.Diagnostics.Append(resp.Private.SetKey(ctx, importedKey, nil)...)
	} else {
		plan.CopyHashes, plan.DockerfileHash = state.CopyHashes, state.DockerfileHash
	}
	if plan.SpecHash.IsUnknown() {
		plan.SpecHash = state.SpecHash
	}
	var tags []string
	resp.Diagnostics.Append(plan.Tags.ElementsAs(ctx, &tags, false)...)
	if plan.Reuse.ValueBool() && !plan.SpecHash.IsNull() {
		tags = append(tags, templatebuild.SpecTag(plan.SpecHash.ValueString()))
	}
	building := state.Status.ValueString() == e2b.BuildBuilding
	if building || adopting || (plan.Reuse.ValueBool() && !state.Reuse.ValueBool()) {
		runner := runnerOrError(r.data, &resp.Diagnostics)
		if resp.Diagnostics.HasError() {
			return
		}
		ctx = r.data.logContext(ctx)
		templateID, buildID := state.TemplateID.ValueString(), state.BuildID.ValueString()
		var err error
		if building {
			timeout, d := plan.Timeouts.Update(ctx, defaultBuildTimeout)
			resp.Diagnostics.Append(d...)
			var status string
			status, err = runner.Wait(ctx, templateID, buildID, tags, runOptions(tflog.SetField(ctx, "build_id", buildID), timeout, nil))
			plan.Status = types.StringValue(status)
		} else {
			err = runner.Tag(ctx, templateID, buildID, tags)
		}
		addRunError(&resp.Diagnostics, err, templateID, buildID)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// Delete forgets the build: E2B has no way to delete one build. It removes no tag either:
// a build with reuse may be another state's too (it reused this one, or this one reused
// it), and that state's tags, or a spec tag it relies on, may be among this build's.
func (r *templateBuildResource) Delete(ctx context.Context, req resource.DeleteRequest, _ *resource.DeleteResponse) {
	var state templateBuildModel
	req.State.Get(ctx, &state)
	if state.Status.ValueString() == e2b.BuildBuilding && r.data != nil {
		// A create that timed out, replaced now: the create after this adopts the build.
		r.data.leftRunning.record(state.TemplateID.ValueString(), state.SpecHash.ValueString(), state.BuildID.ValueString())
	}
	tflog.Info(ctx, "build removed from the state only: E2B cannot delete a single build; it goes with its template, and its tags stay",
		map[string]any{"build_id": state.BuildID.ValueString()})
}

// ImportState takes "template_id/build_id", or the identity's template_id and build_id,
// and marks the build for its first plan (template_build_import.go).
func (r *templateBuildResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	defer identityAfterImport(ctx, resp)
	templateID, buildID, ok := strings.Cut(req.ID, "/")
	var identity buildIdentity
	if importedIdentity(ctx, req, &identity, &resp.Diagnostics) {
		templateID, buildID, ok = identity.TemplateID.ValueString(), identity.BuildID.ValueString(), true
	}
	if !ok || e2b.ValidateTemplateID(templateID) != nil || e2b.ValidateBuildID(buildID) != nil {
		resp.Diagnostics.AddError("Invalid import ID",
			fmt.Sprintf("Import ID %q must be template_id/build_id, such as abcdefghij0123456789/1f0c6f2e-8f5b-4b8e-9a8e-1c2d3e4f5a6b.", templateID+"/"+buildID))
		return
	}
	api := apiOrError(r.data, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	markImported(r.data.logContext(ctx), api, templateID, buildID, resp)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("template_id"), templateID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("build_id"), buildID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), buildID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("files_hash"), templatebuild.HashPortable)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("force"), false)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("reuse"), false)...)
}
