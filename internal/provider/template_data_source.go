package provider

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

var _ datasource.DataSourceWithConfigure = (*templateDataSource)(nil)

// NewTemplateDataSource is the e2b_template data source.
func NewTemplateDataSource() datasource.DataSource { return &templateDataSource{} }

type templateDataSource struct {
	data *ProviderData
}

type templateDataModel struct {
	Template    types.String `tfsdk:"template"`
	ID          types.String `tfsdk:"id"`
	Name        types.String `tfsdk:"name"`
	Names       types.List   `tfsdk:"names"`
	Public      types.Bool   `tfsdk:"public"`
	BuildID     types.String `tfsdk:"build_id"`
	BuildStatus types.String `tfsdk:"build_status"`
	CPUCount    types.Int64  `tfsdk:"cpu_count"`
	MemoryMB    types.Int64  `tfsdk:"memory_mb"`
	CreatedAt   types.String `tfsdk:"created_at"`
	UpdatedAt   types.String `tfsdk:"updated_at"`
	Builds      types.List   `tfsdk:"builds"`
}

// templateBuildObject is the type of an element of builds.
var templateBuildObject = types.ObjectType{AttrTypes: map[string]attr.Type{
	"build_id":    types.StringType,
	"status":      types.StringType,
	"created_at":  types.StringType,
	"finished_at": types.StringType,
	"tags":        types.ListType{ElemType: types.StringType},
}}

func (d *templateDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_template"
}

func (d *templateDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	computedString := func(description string) dschema.StringAttribute {
		return dschema.StringAttribute{MarkdownDescription: description, Computed: true}
	}
	resp.Schema = dschema.Schema{
		MarkdownDescription: "Looks up an existing E2B template, such as one another team manages, and the build " +
			"its name resolves to: `name` (the build tagged `default`), `name:tag` or `name:<build ID>`. " +
			"Sandboxes and `from_template` resolve a tag to its newest ready build; so does this data source. " +
			"A template that does not exist (or is not visible to your API key) is an error.",
		Attributes: map[string]dschema.Attribute{
			"template": dschema.StringAttribute{
				MarkdownDescription: "The template: a template ID, `name`, `name:tag` or `name:<build ID>` " +
					"(a name may carry its namespace, `team/name`).",
				Required:   true,
				Validators: []validator.String{templateRunRefValidator()},
			},
			"id":     computedString("Template ID."),
			"name":   computedString("Template name (its alias), without namespace and tag."),
			"names":  dschema.ListAttribute{MarkdownDescription: "Full names E2B knows the template by, such as `team/name`.", Computed: true, ElementType: types.StringType},
			"public": dschema.BoolAttribute{MarkdownDescription: "Whether every team may start sandboxes from the template.", Computed: true},
			"build_id": computedString("The build a sandbox started from `template` runs: the newest ready build of its tag " +
				"(`default` when none is given), or the build it names. Null when no build tagged `default` is ready. " +
				"While the tag's newest build is not ready (in progress, or failed) and an earlier one still serves the " +
				"tag, reading fails: E2B's API does not name that earlier build."),
			"build_status": computedString("Status of `build_id`: always `ready` when `template` names a tag; for " +
				"`name:<build ID>`, that build's status (`waiting`, `building`, `ready` or `error`; sandboxes start " +
				"only from a ready one)."),
			"cpu_count":  dschema.Int64Attribute{MarkdownDescription: "vCPUs of `build_id`.", Computed: true},
			"memory_mb":  dschema.Int64Attribute{MarkdownDescription: "Memory of `build_id` in MiB.", Computed: true},
			"created_at": computedString("When the template was created (RFC 3339)."),
			"updated_at": computedString("When the template was last updated (RFC 3339)."),
			"builds": dschema.ListNestedAttribute{
				MarkdownDescription: "Builds of the template as E2B lists them (its first page, up to 100 builds).",
				Computed:            true,
				NestedObject: dschema.NestedAttributeObject{Attributes: map[string]dschema.Attribute{
					"build_id":    computedString("Build ID."),
					"status":      computedString("`waiting`, `building`, `ready` or `error`."),
					"created_at":  computedString("When the build was created (RFC 3339)."),
					"finished_at": computedString("When the build finished (RFC 3339); null while it runs."),
					"tags":        dschema.ListAttribute{MarkdownDescription: "Tags last given to this build, sorted, as E2B lists them (a tag of a build that is not ready resolves to an earlier ready build).", Computed: true, ElementType: types.StringType},
				}},
			},
		},
	}
}

func (d *templateDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data, resp.Diagnostics = providerDataFrom(req.ProviderData)
}

func (d *templateDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m templateDataModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	api := apiOrError(d.data, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx = d.data.logContext(ctx)
	resp.Diagnostics.Append(readTemplateData(ctx, api, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// readTemplateData resolves m.Template to a template and a build (as
// sandboxes resolve it) and fills the rest of m.
func readTemplateData(ctx context.Context, api *e2bapi.Client, m *templateDataModel) (diags diag.Diagnostics) {
	ref := m.Template.ValueString()
	identifier, tag := ref, ""
	if !e2b.IsTemplateID(ref) {
		n, err := e2b.ParseName(ref)
		if err != nil {
			diags.AddAttributeError(path.Root("template"), "Invalid template", err.Error())
			return diags
		}
		identifier, tag = n.Identifier(), n.Tag
	}
	templateID, d := resolveTemplateID(ctx, api, identifier)
	diags.Append(d...)
	if diags.HasError() {
		return diags
	}
	t, err := api.GetTemplate(ctx, templateID)
	if err != nil {
		diags.AddError("Reading template "+ref, err.Error())
		return diags
	}
	tags, err := api.ListTags(ctx, templateID)
	if err != nil {
		diags.AddError("Reading tags of "+ref, err.Error())
		return diags
	}
	tagsOf := map[string][]string{}
	for _, tt := range tags {
		tagsOf[tt.BuildID] = append(tagsOf[tt.BuildID], tt.Tag)
	}

	buildID := tag
	if !e2b.IsBuildID(tag) {
		explicit := tag != ""
		if !explicit {
			tag = e2b.DefaultTag
		}
		res, err := api.ResolveTag(ctx, templateID, tag)
		if err != nil {
			diags.AddError("Reading tags of "+ref, err.Error())
			return diags
		}
		// A bare name with no ready build under default is no error: build_id is null.
		if buildID = res.BuildID; buildID == "" && (explicit || res.Earlier) {
			title, detail := unresolvedTag(identifier, tag, res)
			diags.AddAttributeError(path.Root("template"), title, detail)
			return diags
		}
	}

	m.ID = types.StringValue(t.TemplateID)
	m.Name = types.StringValue(templateAlias(t, identifier))
	m.Public = types.BoolValue(t.Public)
	m.CreatedAt = types.StringValue(rfc3339(t.CreatedAt))
	m.UpdatedAt = types.StringValue(rfc3339(t.UpdatedAt))
	m.Names, d = types.ListValueFrom(ctx, types.StringType, nonNilStrings(t.Names))
	diags.Append(d...)
	m.BuildID, m.BuildStatus = types.StringNull(), types.StringNull()
	m.CPUCount, m.MemoryMB = types.Int64Null(), types.Int64Null()

	builds := make([]attr.Value, 0, len(t.Builds))
	found := false
	for _, b := range t.Builds {
		bt := tagsOf[b.BuildID]
		slices.Sort(bt)
		tagList, d := types.ListValueFrom(ctx, types.StringType, nonNilStrings(bt))
		diags.Append(d...)
		finished := types.StringNull()
		if b.FinishedAt != nil {
			finished = types.StringValue(rfc3339(*b.FinishedAt))
		}
		obj, d := types.ObjectValue(templateBuildObject.AttrTypes, map[string]attr.Value{
			"build_id":    types.StringValue(b.BuildID),
			"status":      types.StringValue(b.Status),
			"created_at":  types.StringValue(rfc3339(b.CreatedAt)),
			"finished_at": finished,
			"tags":        tagList,
		})
		diags.Append(d...)
		builds = append(builds, obj)
		if b.BuildID == buildID {
			found = true
			m.BuildStatus = types.StringValue(b.Status)
			m.CPUCount = types.Int64Value(int64(b.CPUCount))
			m.MemoryMB = types.Int64Value(int64(b.MemoryMB))
		}
	}
	m.Builds, d = types.ListValue(templateBuildObject, builds)
	diags.Append(d...)
	if buildID == "" {
		return diags
	}
	m.BuildID = types.StringValue(buildID)
	if !found {
		// Older than the first page of builds, or not a build of this template.
		info, err := api.GetBuildStatus(ctx, templateID, buildID, math.MaxInt32)
		if e2bapi.IsBuildGone(err) {
			diags.AddAttributeError(path.Root("template"), "Build not found", fmt.Sprintf("Template %s has no build %s.", identifier, buildID))
			return diags
		}
		if err != nil {
			diags.AddError("Reading build "+buildID, err.Error())
			return diags
		}
		m.BuildStatus = types.StringValue(info.Status)
	}
	return diags
}

// unresolvedTag is the error of a tag that names no build a sandbox would start
// (res.BuildID is empty).
func unresolvedTag(template, tag string, res *e2bapi.TagResolution) (title, detail string) {
	switch {
	case res.Listed.BuildID == "":
		return "Tag not found", fmt.Sprintf("Template %s has no tag %q. %s", template, tag, listTagsHint(template))
	case res.Earlier:
		return "Tag being moved", fmt.Sprintf("Tag %q of template %s was last given to build %s, which is %s, not ready. "+
			"Until it is ready, sandboxes started from %s:%s run an earlier ready build, which E2B's API does not name. "+
			"Read again once build %s is ready; if it failed, once the tag is moved to a ready build (e2b_alias).",
			tag, template, res.Listed.BuildID, res.ListedStatus, template, tag, res.Listed.BuildID)
	}
	return "Tag not resolved", fmt.Sprintf("Tag %q of template %s has no ready build: it was last given to build %s, which is %s. %s",
		tag, template, res.Listed.BuildID, res.ListedStatus, listTagsHint(template))
}

// templateAlias is the template's name without namespace: its first alias,
// else its first name's, else the identifier it was looked up by.
func templateAlias(t *e2b.TemplateWithBuilds, identifier string) string {
	for _, names := range [][]string{t.Aliases, t.Names} {
		if len(names) > 0 {
			_, alias, ok := strings.Cut(names[0], "/")
			if !ok {
				alias = names[0]
			}
			return alias
		}
	}
	return identifier
}

// listTagsHint says where to see a template's tags and how to point one at a build.
func listTagsHint(template string) string {
	return fmt.Sprintf("A tag resolves to the newest ready build it was given. To see which build has which tag, "+
		"read this data source with template = %q (no tag): its builds attribute lists each build with its tags. "+
		"To point a tag at a ready build, manage it with an e2b_alias resource.", template)
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
