package provider

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/resourcevalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/boolplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/setplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/buildcontext"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/dockerfile"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	buildsteps "github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/templatebuild"
)

// Defaults of e2b_template_build.
const (
	defaultBuildTimeout = 60 * time.Minute

	hashModePortable = "portable"
	hashModeSDK      = "e2b-sdk"
)

var (
	_ resource.ResourceWithConfigure        = (*templateBuildResource)(nil)
	_ resource.ResourceWithImportState      = (*templateBuildResource)(nil)
	_ resource.ResourceWithModifyPlan       = (*templateBuildResource)(nil)
	_ resource.ResourceWithValidateConfig   = (*templateBuildResource)(nil)
	_ resource.ResourceWithConfigValidators = (*templateBuildResource)(nil)
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
	Context           types.String   `tfsdk:"context"`
	Steps             types.List     `tfsdk:"steps"`
	StartCmd          types.String   `tfsdk:"start_cmd"`
	ReadyCmd          types.String   `tfsdk:"ready_cmd"`
	CPUCount          types.Int64    `tfsdk:"cpu_count"`
	MemoryMB          types.Int64    `tfsdk:"memory_mb"`
	Tags              types.Set      `tfsdk:"tags"`
	Force             types.Bool     `tfsdk:"force"`
	FilesHash         types.String   `tfsdk:"files_hash"`
	Triggers          types.Map      `tfsdk:"triggers"`
	CopyHashes        types.List     `tfsdk:"copy_hashes"`
	Status            types.String   `tfsdk:"status"`
	Timeouts          timeouts.Value `tfsdk:"timeouts"`
}

type registryModel struct {
	Type               types.String `tfsdk:"type"`
	Username           types.String `tfsdk:"username"`
	Password           types.String `tfsdk:"password"`
	AWSAccessKeyID     types.String `tfsdk:"aws_access_key_id"`
	AWSSecretAccessKey types.String `tfsdk:"aws_secret_access_key"`
	AWSRegion          types.String `tfsdk:"aws_region"`
	ServiceAccountJSON types.String `tfsdk:"service_account_json"`
}

type stepModel struct {
	Run     *runStepModel  `tfsdk:"run"`
	Copy    *copyStepModel `tfsdk:"copy"`
	Env     types.Map      `tfsdk:"env"`
	Workdir types.String   `tfsdk:"workdir"`
	User    types.String   `tfsdk:"user"`
}

type runStepModel struct {
	Command types.String `tfsdk:"command"`
	User    types.String `tfsdk:"user"`
}

type copyStepModel struct {
	Src             types.String `tfsdk:"src"`
	Dest            types.String `tfsdk:"dest"`
	User            types.String `tfsdk:"user"`
	Mode            types.String `tfsdk:"mode"`
	ResolveSymlinks types.Bool   `tfsdk:"resolve_symlinks"`
}

var modePattern = regexp.MustCompile(`^0?[0-7]{3}$`)

func (r *templateBuildResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_template_build"
}

func (r *templateBuildResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replaceString := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		MarkdownDescription: "One build of an E2B template: a base (`from_image`, `from_template` or a `dockerfile`) " +
			"and ordered build steps, run by E2B (or the local server) into a snapshot that sandboxes start from.\n\n" +
			"**Planning** hashes every COPY source (see the hashing guide): the hashes are shown in `copy_hashes`, " +
			"and a changed hash, like any changed argument, replaces the build. An unchanged context plans nothing, " +
			"also from a fresh clone with other modification times and umask. Nothing is uploaded during a plan.\n\n" +
			"**Apply** checks that the context still has the planned hashes, uploads only the COPY archives E2B " +
			"does not have yet, starts the build and follows it to the end, logging every build log line. The " +
			"build ID is saved in the state before waiting, so a build whose apply timed out is still tracked: " +
			"the next plan refreshes its status and waits for it if it is still running.\n\n" +
			"**Destroy** only forgets the build: E2B cannot delete a single build. Builds go when their template " +
			"(`e2b_template`) is deleted.",
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
				Validators:          []validator.String{stringCheck{"must be a template ID", e2bapi.ValidateTemplateID}},
				PlanModifiers:       replaceString,
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
					"`aws_secret_access_key`, `aws_region`) or `gcp` (`service_account_json`). The secrets are " +
					"sensitive; they are kept in the state like every other argument.",
				Optional: true,
				Attributes: map[string]schema.Attribute{
					"type": schema.StringAttribute{
						MarkdownDescription: "`registry`, `aws` or `gcp`.",
						Required:            true,
						Validators:          []validator.String{stringvalidator.OneOf("registry", "aws", "gcp")},
					},
					"username":              schema.StringAttribute{MarkdownDescription: "Registry user (`registry`).", Optional: true},
					"password":              schema.StringAttribute{MarkdownDescription: "Registry password (`registry`).", Optional: true, Sensitive: true},
					"aws_access_key_id":     schema.StringAttribute{MarkdownDescription: "AWS access key ID (`aws`).", Optional: true},
					"aws_secret_access_key": schema.StringAttribute{MarkdownDescription: "AWS secret access key (`aws`).", Optional: true, Sensitive: true},
					"aws_region":            schema.StringAttribute{MarkdownDescription: "AWS region (`aws`).", Optional: true},
					"service_account_json":  schema.StringAttribute{MarkdownDescription: "GCP service account key as JSON (`gcp`).", Optional: true, Sensitive: true},
				},
				PlanModifiers: []planmodifier.Object{objectplanmodifier.RequiresReplace()},
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
					"line number. Cannot be combined with `steps`.",
				Optional:      true,
				Validators:    []validator.String{stringvalidator.LengthAtLeast(1)},
				PlanModifiers: replaceString,
			},
			"context": schema.StringAttribute{
				MarkdownDescription: "Directory COPY sources are taken from. Defaults to the directory of " +
					"`dockerfile` when it is a path, else Terraform's working directory (the root module). " +
					"A `.dockerignore` file in it excludes files with Docker's rules. Relative paths are taken " +
					"from Terraform's working directory; `path.module` makes them work from any module.",
				Optional:      true,
				Validators:    []validator.String{stringvalidator.LengthAtLeast(1)},
				PlanModifiers: replaceString,
			},
			"steps": schema.ListNestedAttribute{
				MarkdownDescription: "Build steps, run in order. Each step sets exactly one of `run`, `copy`, `env`, `workdir` and `user`.",
				Optional:            true,
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"run": schema.SingleNestedAttribute{
						MarkdownDescription: "Run a shell command (`bash -l -c`); a non-zero exit fails the build.",
						Optional:            true,
						Attributes: map[string]schema.Attribute{
							"command": schema.StringAttribute{MarkdownDescription: "The command.", Required: true},
							"user":    schema.StringAttribute{MarkdownDescription: "User to run it as, for this step only.", Optional: true},
						},
					},
					"copy": schema.SingleNestedAttribute{
						MarkdownDescription: "Copy files from `context` into the template, with Docker's COPY semantics.",
						Optional:            true,
						Attributes: map[string]schema.Attribute{
							"src": schema.StringAttribute{
								MarkdownDescription: "Source relative to `context`: a file, a directory or a glob (`*`, `?`, `[...]`, `**`). It must stay inside the context.",
								Required:            true,
								Validators:          []validator.String{stringCheck{"must be a relative path inside the context", checkCopySrc}},
							},
							"dest": schema.StringAttribute{MarkdownDescription: "Destination; a trailing `/` copies into that directory.", Required: true},
							"user": schema.StringAttribute{MarkdownDescription: "Owner (`user` or `user:group`) of the copied files; defaults to the current user.", Optional: true},
							"mode": schema.StringAttribute{
								MarkdownDescription: "Octal permissions applied to the copied files, such as `0755`.",
								Optional:            true,
								Validators:          []validator.String{stringvalidator.RegexMatches(modePattern, "must be octal permissions such as 0755")},
							},
							"resolve_symlinks": schema.BoolAttribute{
								MarkdownDescription: "Copy what symlinks inside the context point to instead of the links. Defaults to `false`.",
								Optional:            true,
							},
						},
					},
					"env": schema.MapAttribute{
						MarkdownDescription: "Environment variables for later steps and for sandboxes (`$VAR` is expanded).",
						ElementType:         types.StringType,
						Optional:            true,
					},
					"workdir": schema.StringAttribute{MarkdownDescription: "Working directory for later steps and sandboxes; created when missing.", Optional: true},
					"user":    schema.StringAttribute{MarkdownDescription: "User for later steps and sandboxes; created when missing.", Optional: true},
				}},
				Validators:    []validator.List{listvalidator.SizeAtLeast(1)},
				PlanModifiers: []planmodifier.List{listplanmodifier.RequiresReplace()},
			},
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
				PlanModifiers:       []planmodifier.Int64{int64planmodifier.RequiresReplace()},
			},
			"memory_mb": schema.Int64Attribute{
				MarkdownDescription: "Memory of sandboxes from this build in MiB: an even number of at least 128 (and within your team's limit). E2B's default is 1024.",
				Optional:            true,
				Validators:          []validator.Int64{int64validator.AtLeast(128), evenValidator{}},
				PlanModifiers:       []planmodifier.Int64{int64planmodifier.RequiresReplace()},
			},
			"tags": schema.SetAttribute{
				MarkdownDescription: "Tags given to the build; once it is ready, `name:tag` starts sandboxes from it. Without tags the build gets `default`. " +
					"The first build of a template carries `default` too: it runs on the build E2B registered with the template.",
				ElementType:   types.StringType,
				Optional:      true,
				Validators:    []validator.Set{setvalidator.ValueStringsAre(tagValidator())},
				PlanModifiers: []planmodifier.Set{setplanmodifier.RequiresReplace()},
			},
			"force": schema.BoolAttribute{
				MarkdownDescription: "Rebuild every layer instead of reusing E2B's layer cache. Defaults to `false`.",
				Optional:            true,
				Computed:            true,
				Default:             booldefault.StaticBool(false),
				PlanModifiers:       []planmodifier.Bool{boolplanmodifier.RequiresReplace()},
			},
			"files_hash": schema.StringAttribute{
				MarkdownDescription: "How COPY sources are hashed: `portable` (default: the same on every machine and " +
					"filesystem) or `e2b-sdk` (what the E2B SDKs compute, so uploads are shared with SDK users of " +
					"your team; depends on directory sizes, so not portable across filesystems).",
				Optional:      true,
				Computed:      true,
				Default:       stringdefault.StaticString(hashModePortable),
				Validators:    []validator.String{stringvalidator.OneOf(hashModePortable, hashModeSDK)},
				PlanModifiers: replaceString,
			},
			"triggers": schema.MapAttribute{
				MarkdownDescription: "Arbitrary values; changing any of them makes a new build (for example a date, to pick up a moving base image tag).",
				ElementType:         types.StringType,
				Optional:            true,
				PlanModifiers:       []planmodifier.Map{mapplanmodifier.RequiresReplace()},
			},
			"copy_hashes": schema.ListAttribute{
				MarkdownDescription: "Files hash of every COPY step, in build order (including the COPY instructions of a `dockerfile`). Unknown when the context is not known at plan time.",
				ElementType:         types.StringType,
				Computed:            true,
			},
			"status": schema.StringAttribute{
				MarkdownDescription: "Build status: `ready`, or `building` when the apply stopped waiting before the end.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"timeouts": timeouts.Attributes(ctx, timeouts.Opts{Create: true, Update: true,
				CreateDescription: "How long to wait for the build (default `60m`). When it elapses the build goes on: " +
					"the state keeps it with status `building` and the next apply waits for it again.",
				UpdateDescription: "How long to wait for a build that an earlier apply left running (default `60m`).",
			}),
		},
	}
}

func (r *templateBuildResource) ConfigValidators(context.Context) []resource.ConfigValidator {
	return []resource.ConfigValidator{
		resourcevalidator.ExactlyOneOf(path.MatchRoot("from_image"), path.MatchRoot("from_template"), path.MatchRoot("dockerfile")),
		resourcevalidator.Conflicting(path.MatchRoot("dockerfile"), path.MatchRoot("steps")),
		resourcevalidator.Conflicting(path.MatchRoot("from_image_registry"), path.MatchRoot("from_template")),
		resourcevalidator.Conflicting(path.MatchRoot("from_image_registry"), path.MatchRoot("dockerfile")),
	}
}

// ValidateConfig checks the shape of each step: exactly one kind per step.
func (r *templateBuildResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var steps types.List
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("steps"), &steps)...)
	if resp.Diagnostics.HasError() || steps.IsNull() || steps.IsUnknown() {
		return
	}
	for i, el := range steps.Elements() {
		obj, ok := el.(types.Object)
		if !ok || obj.IsUnknown() || obj.IsNull() {
			continue
		}
		var set []string
		for _, k := range []string{"run", "copy", "env", "workdir", "user"} {
			if v := obj.Attributes()[k]; v != nil && !v.IsNull() {
				set = append(set, k)
			}
		}
		if len(set) != 1 {
			resp.Diagnostics.AddAttributeError(path.Root("steps").AtListIndex(i), "Invalid build step",
				fmt.Sprintf("Step %d must set exactly one of run, copy, env, workdir and user; it sets %s.",
					i+1, describeSet(set)))
		}
	}
}

func describeSet(set []string) string {
	if len(set) == 0 {
		return "none"
	}
	return strings.Join(set, " and ")
}

// checkCopySrc rejects COPY sources that are absolute or climb out of the
// context; what exists is checked at plan time by the listing.
func checkCopySrc(src string) error {
	if filepath.IsAbs(src) || strings.HasPrefix(src, "/") {
		return fmt.Errorf("COPY source %q is absolute; it must be relative to the context", src)
	}
	clean := filepath.ToSlash(filepath.Clean(src))
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return fmt.Errorf("COPY source %q escapes the context", src)
	}
	return nil
}

type cpuCountValidator struct{}

func (cpuCountValidator) Description(context.Context) string {
	return "must be 1 or an even number up to 32"
}
func (v cpuCountValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v cpuCountValidator) ValidateInt64(_ context.Context, req validator.Int64Request, resp *validator.Int64Response) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	n := req.ConfigValue.ValueInt64()
	if n < 1 || n > 32 || (n != 1 && n%2 != 0) {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid cpu_count", fmt.Sprintf("cpu_count is %d; it must be 1 or an even number up to 32.", n))
	}
}

type evenValidator struct{}

func (evenValidator) Description(context.Context) string               { return "must be even" }
func (v evenValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v evenValidator) ValidateInt64(_ context.Context, req validator.Int64Request, resp *validator.Int64Response) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if n := req.ConfigValue.ValueInt64(); n%2 != 0 {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid "+req.Path.String(), fmt.Sprintf("%s is %d; it must be an even number.", req.Path, n))
	}
}

func (r *templateBuildResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data, resp.Diagnostics = providerDataFrom(req.ProviderData)
}

// buildSpec is a build resolved from the configuration: the start request
// without files hashes, and where each COPY takes its files from.
type buildSpec struct {
	start      e2bapi.TemplateBuildStartV2
	contextDir string
	copies     []copySource
}

// copySource is one COPY step: its index in start.Steps and its listing
// options.
type copySource struct {
	step         int
	src, dest    string
	resolveLinks bool
}

// resolveSpec turns the configuration into a buildSpec. ok is false when a
// value it needs is not known yet (the plan then leaves the hashes unknown).
func resolveSpec(ctx context.Context, m *templateBuildModel) (spec *buildSpec, ok bool, diags diag.Diagnostics) {
	for _, v := range []attr.Value{m.FromImage, m.FromTemplate, m.Dockerfile, m.Context, m.Steps, m.StartCmd, m.ReadyCmd} {
		if v.IsUnknown() {
			return nil, false, nil
		}
	}
	spec = &buildSpec{}
	spec.start.FromImage = m.FromImage.ValueString()
	spec.start.FromTemplate = m.FromTemplate.ValueString()
	spec.start.Force = m.Force.ValueBool()
	spec.start.StartCmd = m.StartCmd.ValueString()
	spec.start.ReadyCmd = m.ReadyCmd.ValueString()
	if reg := m.FromImageRegistry; reg != nil {
		spec.start.FromImageRegistry = &e2bapi.FromImageRegistry{
			Type: reg.Type.ValueString(), Username: reg.Username.ValueString(), Password: reg.Password.ValueString(),
			AWSAccessKeyID: reg.AWSAccessKeyID.ValueString(), AWSSecretAccessKey: reg.AWSSecretAccessKey.ValueString(),
			AWSRegion: reg.AWSRegion.ValueString(), ServiceAccountJSON: reg.ServiceAccountJSON.ValueString(),
		}
	}

	contextDir := "."
	var steps []e2bapi.TemplateStep
	if !m.Dockerfile.IsNull() {
		content, dir, err := readDockerfile(m.Dockerfile.ValueString())
		if err != nil {
			diags.AddAttributeError(path.Root("dockerfile"), "Invalid dockerfile", err.Error())
			return nil, true, diags
		}
		if dir != "" {
			contextDir = dir
		}
		t, err := dockerfile.Convert(content)
		if err != nil {
			diags.AddAttributeError(path.Root("dockerfile"), "Invalid dockerfile", err.Error())
			return nil, true, diags
		}
		for _, w := range t.Warnings {
			diags.AddAttributeWarning(path.Root("dockerfile"), "Dockerfile instruction ignored", w)
		}
		spec.start.FromImage = t.FromImage
		if spec.start.StartCmd == "" {
			spec.start.StartCmd = t.StartCmd
		}
		if spec.start.ReadyCmd == "" {
			spec.start.ReadyCmd = t.ReadyCmd
		}
		for _, s := range t.Steps {
			steps = append(steps, s)
			if s.Type == buildsteps.Copy {
				spec.copies = append(spec.copies, copySource{step: len(steps) - 1, src: s.Args[0], dest: s.Args[1]})
			}
		}
	}
	if !m.Context.IsNull() {
		contextDir = m.Context.ValueString()
	}

	if !m.Steps.IsNull() {
		var models []stepModel
		if d := m.Steps.ElementsAs(ctx, &models, false); d.HasError() {
			// An element not known yet (a whole step from another resource).
			return nil, false, nil
		}
		for i, s := range models {
			step, known, err := stepFromModel(ctx, s)
			if !known {
				return nil, false, nil
			}
			if err != nil {
				diags.AddAttributeError(path.Root("steps").AtListIndex(i), "Invalid build step", fmt.Sprintf("Step %d: %v", i+1, err))
				continue
			}
			steps = append(steps, step)
			if s.Copy != nil {
				spec.copies = append(spec.copies, copySource{
					step: len(steps) - 1, src: s.Copy.Src.ValueString(), dest: s.Copy.Dest.ValueString(),
					resolveLinks: s.Copy.ResolveSymlinks.ValueBool(),
				})
			}
		}
	}
	if steps == nil {
		steps = []e2bapi.TemplateStep{}
	}
	spec.start.Steps = steps

	abs, err := filepath.Abs(contextDir)
	if err != nil {
		diags.AddAttributeError(path.Root("context"), "Invalid context", err.Error())
		return nil, true, diags
	}
	spec.contextDir = abs
	if len(spec.copies) > 0 {
		if st, err := os.Stat(abs); err != nil {
			diags.AddAttributeError(path.Root("context"), "Missing build context",
				fmt.Sprintf("The build context directory %s does not exist or cannot be read: %v", abs, err))
		} else if !st.IsDir() {
			diags.AddAttributeError(path.Root("context"), "Invalid build context", fmt.Sprintf("%s is not a directory.", abs))
		}
	}
	return spec, true, diags
}

// readDockerfile returns the Dockerfile's content and, when the value is a
// path to a file, its directory.
func readDockerfile(v string) (content, dir string, err error) {
	if !strings.ContainsAny(v, "\n") {
		if st, statErr := os.Stat(v); statErr == nil && st.Mode().IsRegular() {
			b, err := os.ReadFile(v)
			if err != nil {
				return "", "", err
			}
			return string(b), filepath.Dir(v), nil
		}
		if !strings.HasPrefix(strings.ToUpper(strings.TrimSpace(v)), "FROM") {
			return "", "", fmt.Errorf("dockerfile %q is neither a readable file nor Dockerfile content (which starts with FROM)", v)
		}
	}
	return v, "", nil
}

// stepFromModel converts one configured step; known is false when one of
// its values is not known yet.
func stepFromModel(ctx context.Context, s stepModel) (step e2bapi.TemplateStep, known bool, err error) {
	switch {
	case s.Run != nil:
		if s.Run.Command.IsUnknown() || s.Run.User.IsUnknown() {
			return step, false, nil
		}
		step = e2bapi.TemplateStep{Type: buildsteps.Run, Args: []string{s.Run.Command.ValueString()}}
		if u := s.Run.User.ValueString(); u != "" {
			step.Args = append(step.Args, u)
		}
	case s.Copy != nil:
		c := s.Copy
		for _, v := range []attr.Value{c.Src, c.Dest, c.User, c.Mode, c.ResolveSymlinks} {
			if v.IsUnknown() {
				return step, false, nil
			}
		}
		mode := c.Mode.ValueString()
		if mode != "" && len(mode) == 3 {
			mode = "0" + mode
		}
		step = e2bapi.TemplateStep{Type: buildsteps.Copy, Args: []string{c.Src.ValueString(), c.Dest.ValueString(), c.User.ValueString(), mode}}
	case !s.Env.IsNull():
		if s.Env.IsUnknown() {
			return step, false, nil
		}
		var env map[string]types.String
		if d := s.Env.ElementsAs(ctx, &env, false); d.HasError() {
			return step, false, nil
		}
		keys := make([]string, 0, len(env))
		for k, v := range env {
			if v.IsUnknown() {
				return step, false, nil
			}
			keys = append(keys, k)
		}
		if len(keys) == 0 {
			return step, true, errors.New("env is empty")
		}
		sort.Strings(keys)
		step = e2bapi.TemplateStep{Type: buildsteps.Env}
		for _, k := range keys {
			step.Args = append(step.Args, k, env[k].ValueString())
		}
	case !s.Workdir.IsNull():
		if s.Workdir.IsUnknown() {
			return step, false, nil
		}
		step = e2bapi.TemplateStep{Type: buildsteps.Workdir, Args: []string{s.Workdir.ValueString()}}
	case !s.User.IsNull():
		if s.User.IsUnknown() {
			return step, false, nil
		}
		step = e2bapi.TemplateStep{Type: buildsteps.User, Args: []string{s.User.ValueString()}}
	default:
		return step, true, errors.New("sets none of run, copy, env, workdir and user")
	}
	return step, true, nil
}

// hashCopies lists and hashes every COPY source. The listings are returned
// too: they carry the file digests the archives are checked against.
func hashCopies(ctx context.Context, spec *buildSpec, mode string) ([]string, []*buildcontext.Listing, diag.Diagnostics) {
	var diags diag.Diagnostics
	var cache *buildcontext.StatCache
	if p, err := buildcontext.DefaultStatCachePath(); err == nil {
		cache = buildcontext.OpenStatCache(p)
	} else {
		tflog.Debug(ctx, "no stat cache", map[string]any{"error": err.Error()})
	}
	hashes := make([]string, len(spec.copies))
	listings := make([]*buildcontext.Listing, len(spec.copies))
	for i, c := range spec.copies {
		started := time.Now()
		l, err := buildcontext.List(spec.contextDir, c.src, buildcontext.ListOptions{ResolveLinks: c.resolveLinks})
		if err == nil {
			if mode == hashModeSDK {
				hashes[i], err = l.SDKHash(ctx, c.dest)
			} else {
				hashes[i], err = l.PortableHash(ctx, c.dest, buildcontext.HashOptions{Cache: cache})
			}
		}
		if err != nil {
			diags.AddError("Build context of step "+strconv.Itoa(c.step+1),
				fmt.Sprintf("COPY %s %s (step %d, context %s): %v", c.src, c.dest, c.step+1, spec.contextDir, err))
			continue
		}
		listings[i] = l
		tflog.Debug(ctx, "hashed COPY source", map[string]any{
			"step": c.step + 1, "src": c.src, "entries": len(l.Entries), "files_hash": hashes[i],
			"duration_ms": time.Since(started).Milliseconds(),
		})
	}
	if cache != nil {
		if err := cache.Save(); err != nil {
			tflog.Warn(ctx, "could not save the stat cache", map[string]any{"path": cache.Path(), "error": err.Error()})
		}
	}
	return hashes, listings, diags
}

func (r *templateBuildResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return // destroy
	}
	var plan templateBuildModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var state *templateBuildModel
	if !req.State.Raw.IsNull() {
		state = &templateBuildModel{}
		resp.Diagnostics.Append(req.State.Get(ctx, state)...)
		if resp.Diagnostics.HasError() {
			return
		}
	}

	spec, known, diags := resolveSpec(ctx, &plan)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	hashes := types.ListUnknown(types.StringType)
	if known {
		list, _, diags := hashCopies(ctx, spec, plan.FilesHash.ValueString())
		resp.Diagnostics.Append(diags...)
		if resp.Diagnostics.HasError() {
			return
		}
		hashes, diags = types.ListValueFrom(ctx, types.StringType, list)
		resp.Diagnostics.Append(diags...)
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("copy_hashes"), hashes)...)

	if state == nil {
		return
	}
	replace := !hashes.Equal(state.CopyHashes)
	// An imported build has no hashes in its state: a known tree then
	// replaces it too, since nothing says it matches.
	if replace {
		resp.RequiresReplace = append(resp.RequiresReplace, path.Root("copy_hashes"))
		return
	}
	if state.Status.ValueString() == e2bapi.BuildBuilding {
		// An earlier apply stopped waiting: this one waits for the end.
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("status"), types.StringUnknown())...)
	}
}

func (r *templateBuildResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan templateBuildModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	api := apiOrError(r.data, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx = r.data.logContext(ctx)
	timeout, d := plan.Timeouts.Create(ctx, defaultBuildTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	spec, known, diags := resolveSpec(ctx, &plan)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !known {
		resp.Diagnostics.AddError("Build configuration not known", "A value of the build is still unknown during apply; this is a bug in Terraform or the provider.")
		return
	}
	// Re-list and re-hash: the tree must be the one the plan showed.
	hashes, listings, diags := hashCopies(ctx, spec, plan.FilesHash.ValueString())
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !plan.CopyHashes.IsUnknown() {
		var planned []string
		resp.Diagnostics.Append(plan.CopyHashes.ElementsAs(ctx, &planned, false)...)
		for i, h := range hashes {
			if i < len(planned) && planned[i] != h {
				c := spec.copies[i]
				resp.Diagnostics.AddError("Build context changed since plan",
					fmt.Sprintf("The files of COPY %s %s (step %d) changed after the plan: files hash %s at plan, %s now. "+
						"Most recently modified: %s. Run terraform plan again.",
						c.src, c.dest, c.step+1, planned[i], h, newestEntries(listings[i], 3)))
			}
		}
		if resp.Diagnostics.HasError() {
			return
		}
	}
	for i, c := range spec.copies {
		spec.start.Steps[c.step].FilesHash = hashes[i]
	}
	hashList, d := types.ListValueFrom(ctx, types.StringType, hashes)
	resp.Diagnostics.Append(d...)
	plan.CopyHashes = hashList

	templateID := plan.TemplateID.ValueString()
	tpl, err := api.GetTemplate(ctx, templateID)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("template_id"), "Reading template "+templateID, err.Error())
		return
	}

	copies := make([]templatebuild.Copy, len(spec.copies))
	for i, c := range spec.copies {
		copies[i] = templatebuild.Copy{Name: fmt.Sprintf("COPY %s %s (step %d)", c.src, c.dest, c.step+1), Listing: listings[i], Hash: hashes[i]}
	}
	if err := templatebuild.UploadMissing(waitCtx, api, templateID, copies, tflogLogger{}); err != nil {
		resp.Diagnostics.AddError("Uploading the build context", err.Error())
		return
	}

	start := templatebuild.Request{CPUCount: optionalInt32(plan.CPUCount), MemoryMB: optionalInt32(plan.MemoryMB), Start: spec.start}
	resp.Diagnostics.Append(plan.Tags.ElementsAs(ctx, &start.Tags, false)...)
	buildID, onWaiting, err := templatebuild.Start(ctx, api, tpl, start, tflogLogger{})
	if err != nil {
		resp.Diagnostics.AddError("Starting build of template "+templateID, err.Error())
		return
	}
	plan.ID = types.StringValue(buildID)
	plan.BuildID = types.StringValue(buildID)
	plan.Status = types.StringValue(e2bapi.BuildBuilding)
	// Saved before waiting: an apply that stops now still tracks the build.
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.Status, diags = followBuild(waitCtx, ctx, api, templateID, buildID, spec.start.Steps)
	resp.Diagnostics.Append(diags...)
	if onWaiting && plan.Status.ValueString() == e2bapi.BuildReady {
		resp.Diagnostics.Append(assignTags(ctx, api, templateID, buildID, start.Tags)...)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// newestEntries names the n most recently modified files of a listing,
// the likely culprits of a change.
func newestEntries(l *buildcontext.Listing, n int) string {
	entries := slices.Clone(l.Entries)
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].ID.MtimeNs > entries[j].ID.MtimeNs })
	var names []string
	for _, e := range entries {
		if e.Kind == buildcontext.KindFile && len(names) < n {
			names = append(names, filepath.Join(l.Context, filepath.FromSlash(e.Path)))
		}
	}
	if len(names) == 0 {
		return "(no files)"
	}
	return strings.Join(names, ", ")
}

// optionalInt32 is v as the API's optional int32 (the schema bounds it).
func optionalInt32(v types.Int64) *int32 {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	n := int32(v.ValueInt64()) //nolint:gosec // validated to a small range by the schema
	return &n
}

// assignTags gives a build started on the template's waiting build its tags
// (templatebuild.AssignMissingTags).
func assignTags(ctx context.Context, api *e2bapi.Client, templateID, buildID string, tags []string) diag.Diagnostics {
	var diags diag.Diagnostics
	if err := templatebuild.AssignMissingTags(ctx, api, templateID, buildID, tags); err != nil {
		diags.AddAttributeError(path.Root("tags"), "Tagging build "+buildID, err.Error())
	}
	return diags
}

// followBuild waits for the build under waitCtx and returns its status.
// When waitCtx's deadline passes first the build goes on: the status is
// "building" with a warning, so the state keeps tracking it. logCtx
// carries the logging setup and outlives waitCtx.
func followBuild(waitCtx, logCtx context.Context, api *e2bapi.Client, templateID, buildID string, steps []e2bapi.TemplateStep) (types.String, diag.Diagnostics) {
	var diags diag.Diagnostics
	status, err := templatebuild.Follow(waitCtx, api, templateID, buildID, steps, func(e e2bapi.BuildLogEntry, step string) {
		tflog.Info(logCtx, "build log: "+e.Message, map[string]any{
			"build_id": buildID, "step": e.Step, "level": e.Level, "step_description": step,
		})
	})
	var failed *templatebuild.FailedError
	switch {
	case err == nil:
		return types.StringValue(status), diags
	case errors.As(err, &failed):
		diags.AddError("Build failed", failed.Error())
		return types.StringValue(e2bapi.BuildError), diags
	case errors.Is(err, context.DeadlineExceeded) && logCtx.Err() == nil:
		diags.AddWarning("Build still running",
			fmt.Sprintf("Build %s of template %s did not finish within the create timeout; it goes on. The state "+
				"records it with status \"building\": the next plan refreshes it, and apply waits for it again.", buildID, templateID))
		return types.StringValue(e2bapi.BuildBuilding), diags
	default:
		diags.AddError("Following build "+buildID,
			fmt.Sprintf("%v. The build may go on; the state records it and the next plan refreshes its status.", err))
		return types.StringValue(e2bapi.BuildBuilding), diags
	}
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
		e2bapi.BuildStatusQuery{LogsOffset: math.MaxInt32})
	if isBuildGone(err) {
		tflog.Warn(ctx, "build no longer exists; removing it from the state", map[string]any{"build_id": state.BuildID.ValueString()})
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Reading build "+state.BuildID.ValueString(), err.Error())
		return
	}
	switch info.Status {
	case e2bapi.BuildError:
		// A build that failed after its apply stopped waiting: the next
		// apply makes a new one.
		tflog.Warn(ctx, "build failed; removing it from the state so that the next apply builds again", map[string]any{"build_id": state.BuildID.ValueString()})
		resp.State.RemoveResource(ctx)
		return
	case e2bapi.BuildWaiting:
		// Registered but never started (an apply stopped in between):
		// nothing will ever run it.
		resp.State.RemoveResource(ctx)
		return
	}
	state.Status = types.StringValue(info.Status)
	state.ID = state.BuildID
	if state.CopyHashes.IsUnknown() {
		state.CopyHashes = types.ListNull(types.StringType)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// isBuildGone reports whether err says the build (or its template) does not
// exist: E2B answers an unknown build with 400, not 404.
func isBuildGone(err error) bool {
	if err == nil {
		return false
	}
	if e2bapi.IsNotFound(err) {
		return true
	}
	var apiErr *e2bapi.APIError
	return e2bapi.IsInvalid(err) && errors.As(err, &apiErr) && strings.Contains(strings.ToLower(apiErr.Message), "not found")
}

// Update changes nothing on E2B (every argument replaces the build); it
// waits for a build an earlier apply left running.
func (r *templateBuildResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state templateBuildModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.ID, plan.BuildID, plan.CopyHashes, plan.Status = state.ID, state.BuildID, state.CopyHashes, state.Status
	if state.Status.ValueString() == e2bapi.BuildBuilding {
		api := apiOrError(r.data, &resp.Diagnostics)
		if resp.Diagnostics.HasError() {
			return
		}
		ctx = r.data.logContext(ctx)
		timeout, d := plan.Timeouts.Update(ctx, defaultBuildTimeout)
		resp.Diagnostics.Append(d...)
		waitCtx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		var diags diag.Diagnostics
		// The steps are not needed to follow; log lines name step numbers.
		plan.Status, diags = followBuild(waitCtx, ctx, api, state.TemplateID.ValueString(), state.BuildID.ValueString(), nil)
		resp.Diagnostics.Append(diags...)
		if plan.Status.ValueString() == e2bapi.BuildReady {
			var tags []string
			resp.Diagnostics.Append(plan.Tags.ElementsAs(ctx, &tags, false)...)
			resp.Diagnostics.Append(assignTags(ctx, api, state.TemplateID.ValueString(), state.BuildID.ValueString(), tags)...)
		}
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// Delete forgets the build: E2B has no way to delete one build.
func (r *templateBuildResource) Delete(ctx context.Context, req resource.DeleteRequest, _ *resource.DeleteResponse) {
	var state templateBuildModel
	req.State.Get(ctx, &state)
	tflog.Info(ctx, "build removed from the state only: E2B cannot delete a single build; it goes with its template",
		map[string]any{"build_id": state.BuildID.ValueString()})
}

// ImportState takes "template_id/build_id".
func (r *templateBuildResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	templateID, buildID, ok := strings.Cut(req.ID, "/")
	if !ok || e2bapi.ValidateTemplateID(templateID) != nil || e2bapi.ValidateBuildID(buildID) != nil {
		resp.Diagnostics.AddError("Invalid import ID",
			fmt.Sprintf("Import ID %q must be template_id/build_id, such as abcdefghij0123456789/1f0c6f2e-8f5b-4b8e-9a8e-1c2d3e4f5a6b.", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("template_id"), templateID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("build_id"), buildID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), buildID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("files_hash"), hashModePortable)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("force"), false)...)
}
