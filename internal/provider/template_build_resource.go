package provider

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/resourcevalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/boolplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
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
	replaceString := []planmodifier.String{replaceUnlessImported{}}
	resp.Schema = schema.Schema{
		MarkdownDescription: "One build of an E2B template: a base (`from_image`, `from_template` or a `dockerfile`) " +
			"and ordered build steps, run by E2B (or the local server) into a snapshot that sandboxes start from.\n\n" +
			"**Planning** hashes every COPY source (see the hashing guide): the hashes are shown in `copy_hashes`, " +
			"and a changed hash, like any changed argument, replaces the build. An unchanged context plans nothing, " +
			"also from a fresh clone with other modification times and umask. Nothing is uploaded during a plan.\n\n" +
			"**Apply** checks that the context still has the planned hashes, uploads only the COPY archives E2B " +
			"does not have yet, starts the build and follows it to the end, logging every build log line. The " +
			"build ID is saved in the state before waiting, so a build whose apply timed out is still tracked: " +
			"the apply fails (a CI run does not pass on an unfinished build), the build goes on, and the next " +
			"apply waits for that build instead of building again (see `timeouts`).\n\n" +
			"**Reuse** (`reuse = true`): a build whose `spec_hash` a ready build of the template already carries " +
			"(as its tag `spec-<first 16 hex>`) is not built again: the plan shows that build's ID and says so, and " +
			"apply gives it this resource's tags. A fresh state, another workspace or another checkout of the same " +
			"configuration reuses the build. A build of the same `spec_hash` still running (another apply's) is " +
			"waited for and reused when it ends ready, rather than cancelled by building again; the template's first " +
			"build is the exception, as it runs on the build E2B registered with the template, which gets its spec " +
			"tag only once ready.\n\n" +
			"**Destroy** only forgets the build, reused or not: E2B cannot delete a single build, and it removes no " +
			"tag, as another state may rely on them. Builds go when their template (`e2b_template`) is deleted.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The build ID (same as `build_id`).",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"build_id": schema.StringAttribute{
				MarkdownDescription: "Build ID (a UUID). Sandboxes can start from exactly this build with `name:<build_id>`.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"template_id": schema.StringAttribute{
				MarkdownDescription: "ID of the template to build (`e2b_template.<name>.id`).",
				Required:            true,
				Validators:          []validator.String{stringCheck{"must be a template ID", e2b.ValidateTemplateID}},
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"from_image": schema.StringAttribute{
				MarkdownDescription: "Base Docker image, such as `ubuntu:22.04`. Exactly one of `from_image`, " +
					"`from_template` and `dockerfile` is required.",
				Optional:      true,
				Validators:    []validator.String{stringvalidator.LengthAtLeast(1)},
				PlanModifiers: replaceString,
			},
			"from_image_registry": schema.SingleNestedAttribute{
				MarkdownDescription: "Credentials for a private `from_image` registry. `type` selects which other " +
					"attributes apply: `registry` (`username`, `password`), `aws` (`aws_access_key_id`, " +
					"`aws_secret_access_key`, `aws_region`) or `gcp` (`service_account_json`). The plain secret " +
					"attributes are sensitive but kept in the state like every other argument; with Terraform or " +
					"OpenTofu 1.11 or later use their write-only twins (`password_wo`, `aws_secret_access_key_wo`, " +
					"`service_account_json_wo`), which are sent to E2B and never stored. A write-only secret is not " +
					"compared between plans: change its `*_wo_version` to make a new build with a new secret.",
				Optional:      true,
				Attributes:    registryAttributes(),
				PlanModifiers: []planmodifier.Object{replaceUnlessImported{}},
			},
			"from_template": schema.StringAttribute{
				MarkdownDescription: "Base E2B template, by name (`name`, `name:tag`) or ID; the build starts from its snapshot.",
				Optional:            true,
				Validators:          []validator.String{templateRunRefValidator()},
				PlanModifiers:       replaceString,
			},
			"dockerfile": schema.StringAttribute{
				MarkdownDescription: "A Dockerfile, as the path of a file or as its content. It is converted into " +
					"a base image, build steps and start/ready commands the way the E2B SDK does: one `FROM` only; " +
					"`RUN`, `COPY`/`ADD`, `ENV`/`ARG`, `WORKDIR`, `USER` become steps, `CMD`/`ENTRYPOINT` the start " +
					"command. Multi-stage builds and instructions without an E2B equivalent are refused with their " +
					"line number, and so is `RUN --mount=type=secret` (E2B builds have no build secrets). `steps` run " +
					"after the Dockerfile's own steps, as its default user `user` in `/home/user` unless they say " +
					"otherwise. Only the content counts: a Dockerfile moved " +
					"elsewhere (another checkout path) with the same content does not make a new build, and the " +
					"state keeps the path it was built from.",
				Optional:   true,
				Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"build_args": schema.MapAttribute{
				MarkdownDescription: "Values of the `dockerfile`'s `ARG`s, over their defaults, as `docker build --build-arg` " +
					"sets them (an `ARG` before `FROM` also names the base image). An `ARG` becomes an environment " +
					"variable of later steps and of sandboxes, as in the E2B SDK. A name no `ARG` declares is an " +
					"error, where Docker only warns: the build would not be the one asked for.",
				ElementType:   types.StringType,
				Optional:      true,
				Validators:    []validator.Map{mapvalidator.AlsoRequires(path.MatchRoot("dockerfile"))},
				PlanModifiers: []planmodifier.Map{replaceUnlessImported{}},
			},
			"context": schema.StringAttribute{
				MarkdownDescription: "Directory COPY sources are taken from. Defaults to the directory of " +
					"`dockerfile` when it is a path, else Terraform's working directory (the root module). " +
					"A `.dockerignore` file in it excludes files with Docker's rules. Relative paths are taken " +
					"from Terraform's working directory; `path.module` makes them work from any module. Only the " +
					"files count (`copy_hashes`): the same files at another path (another checkout, an `abspath` " +
					"of it) do not make a new build, and the state keeps the path the build was made from.",
				Optional:   true,
				Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"steps": stepsAttribute(),
			"start_cmd": schema.StringAttribute{
				MarkdownDescription: "Command started at the end of the build and kept running in every sandbox.",
				Optional:            true,
				PlanModifiers:       replaceString,
			},
			"ready_cmd": schema.StringAttribute{
				MarkdownDescription: "Command repeated until it exits 0 before the snapshot is taken (defaults on E2B's side to `sleep 20` with a start command).",
				Optional:            true,
				PlanModifiers:       replaceString,
			},
			"cpu_count": schema.Int64Attribute{
				MarkdownDescription: "vCPUs of sandboxes from this build: 1 or an even number up to 32 (and your team's limit). E2B's default is 2.",
				Optional:            true,
				Validators:          []validator.Int64{cpuCountValidator{}},
				PlanModifiers:       []planmodifier.Int64{replaceUnlessImported{}},
			},
			"memory_mb": schema.Int64Attribute{
				MarkdownDescription: "Memory of sandboxes from this build in MiB: an even number of at least 128 (and within your team's limit). E2B's default is 1024.",
				Optional:            true,
				Validators:          []validator.Int64{int64validator.AtLeast(128), evenValidator{}},
				PlanModifiers:       []planmodifier.Int64{replaceUnlessImported{}},
			},
			"tags": schema.SetAttribute{
				MarkdownDescription: "Tags given to the build; once it is ready, `name:tag` starts sandboxes from it. Without tags the build gets `default`. " +
					"The first build of a template carries `default` too: it runs on the build E2B registered with the template. " +
					"E2B cancels a build when another build of its template sharing a tag starts, so builds of one template " +
					"in one apply that share a tag (`default` included) start one after the other; all of them complete.",
				ElementType:   types.StringType,
				Optional:      true,
				Validators:    []validator.Set{setvalidator.ValueStringsAre(tagValidator())},
				PlanModifiers: []planmodifier.Set{replaceUnlessImported{}},
			},
			"force": schema.BoolAttribute{
				MarkdownDescription: "Rebuild every layer instead of reusing E2B's layer cache. Defaults to `false`.",
				Optional:            true,
				Computed:            true,
				Default:             booldefault.StaticBool(false),
				PlanModifiers:       []planmodifier.Bool{boolplanmodifier.RequiresReplace()},
			},
			"reuse": schema.BoolAttribute{
				MarkdownDescription: "Reuse a ready build of the template with the same `spec_hash` instead of building, " +
					"and tag this build `spec-<first 16 hex of spec_hash>` so that others can reuse it. The plan looks the " +
					"build up when `template_id` is known (the only API call of a plan) and shows its `build_id`. " +
					"`force` builds anyway (a forced build is meant to run), still with the tag. Changing `reuse` " +
					"changes nothing but that tag: turning it on tags the existing build. Defaults to `false`.",
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(false),
			},
			"files_hash": schema.StringAttribute{
				MarkdownDescription: "How COPY sources are hashed: `portable` (default: the same on every machine and " +
					"filesystem) or `e2b-sdk` (what the E2B SDKs compute, so uploads are shared with SDK users of " +
					"your team; depends on directory sizes, so not portable across filesystems).",
				Optional:      true,
				Computed:      true,
				Default:       stringdefault.StaticString(templatebuild.HashPortable),
				Validators:    []validator.String{stringvalidator.OneOf(templatebuild.HashPortable, templatebuild.HashSDK)},
				PlanModifiers: replaceString,
			},
			"triggers": schema.MapAttribute{
				MarkdownDescription: "Arbitrary values; changing any of them makes a new build (for example a date, to pick up a moving base image tag).",
				ElementType:         types.StringType,
				Optional:            true,
				PlanModifiers:       []planmodifier.Map{replaceUnlessImported{}},
			},
			"copy_hashes": schema.ListAttribute{
				MarkdownDescription: "Files hash of every COPY step, in build order (including the COPY instructions of a `dockerfile`). Unknown when the context is not known at plan time.",
				ElementType:         types.StringType,
				Computed:            true,
			},
			"dockerfile_hash": schema.StringAttribute{
				MarkdownDescription: "SHA-256 of the Dockerfile's content (hex); null without `dockerfile`. A changed " +
					"content replaces the build, a moved file does not.",
				Computed: true,
			},
			"spec_hash": schema.StringAttribute{
				MarkdownDescription: "SHA-256 (hex) of everything that defines the build: its base, every step with the " +
					"files hash of each COPY, the start and ready commands, `cpu_count`, `memory_mb` and `triggers`; " +
					"not the tags, `force`, credentials or where the files are. Known at plan time whenever `copy_hashes` " +
					"is, and the same on every machine and checkout path (see the hashing guide).",
				Computed: true,
			},
			"status": schema.StringAttribute{
				MarkdownDescription: "Build status: `ready`, or `building` when the apply stopped waiting before the end.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"timeouts": timeouts.Attributes(ctx, timeouts.Opts{Create: true, Update: true,
				CreateDescription: "How long to wait for the build, from `1s` to `168h` (default `60m`). When it elapses the build goes on " +
					"on the server and the apply fails, so that a CI run does not pass on an unfinished build. Run apply again " +
					"to wait for it: Terraform replaces the tainted resource, and the new one adopts the build still running " +
					"(same template and `spec_hash`) instead of building again.",
				UpdateDescription: "How long to wait for a build that an earlier apply left running, from `1s` to `168h` (default `60m`). " +
					"When it elapses the apply fails and the state keeps the build with status `building`: the next apply waits again.",
			}),
		},
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
	var plan templateBuildModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	runner := runnerOrError(r.data, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx = r.data.logContext(ctx)
	timeout, d := plan.Timeouts.Create(ctx, defaultBuildTimeout)
	resp.Diagnostics.Append(d...)
	// Planned again: the tree must be the one the plan showed.
	b := planBuild(ctx, &plan, &resp.Diagnostics)
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
	if !plan.CopyHashes.IsUnknown() {
		var planned []string
		resp.Diagnostics.Append(plan.CopyHashes.ElementsAs(ctx, &planned, false)...)
		addIssues(&resp.Diagnostics, b.CheckHashes(planned))
		if resp.Diagnostics.HasError() {
			return
		}
	}
	plan.CopyHashes, d = types.ListValueFrom(ctx, types.StringType, b.Hashes())
	resp.Diagnostics.Append(d...)
	plan.DockerfileHash = optionalString(b.DockerfileHash)
	plan.SpecHash = types.StringValue(b.SpecHash)

	opts := runOptions(ctx, timeout, func(buildID string) error {
		plan.ID, plan.BuildID, plan.Status = types.StringValue(buildID), types.StringValue(buildID), types.StringValue(e2b.BuildBuilding)
		// Saved before waiting: an apply that stops now still tracks the build.
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
		if resp.Diagnostics.Append(setIdentity(ctx, resp.Identity, buildIdentity{TemplateID: plan.TemplateID, BuildID: plan.BuildID})...); resp.Diagnostics.HasError() {
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
	resp.Diagnostics.Append(setIdentity(ctx, resp.Identity, buildIdentity{TemplateID: plan.TemplateID, BuildID: plan.BuildID})...)
}

func (r *templateBuildResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
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
	resp.Diagnostics.Append(setIdentity(ctx, resp.Identity, buildIdentity{TemplateID: state.TemplateID, BuildID: state.BuildID})...)
}

// Update changes nothing on E2B but the tags (every other argument replaces the build):
// it waits for a build an earlier apply left running, with reuse tags the ready build
// with its spec tag, which it lacks when reuse was turned on later, and gives an imported
// build the plan adopted its tags and its planned hashes.
func (r *templateBuildResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
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
	// Also for a state a CLI without identities (before 1.12) keeps.
	resp.Diagnostics.Append(setIdentity(ctx, resp.Identity, buildIdentity{TemplateID: plan.TemplateID, BuildID: plan.BuildID})...)
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
// and marks the build for its first plan (common_build_import.go).
func (r *templateBuildResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
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
	resp.Diagnostics.Append(setIdentity(ctx, resp.Identity, buildIdentity{TemplateID: types.StringValue(templateID), BuildID: types.StringValue(buildID)})...)
}
