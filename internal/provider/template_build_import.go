package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/templatebuild"
)

// Adopting an imported build. E2B keeps no build inputs, so an imported e2b_template_build
// has none of its arguments in the state, and its first plan would replace it. A build
// made with reuse carries its spec hash as a tag, though: when the configuration's spec
// hash is that tag's, the build is the one the configuration makes, and the plan adopts
// it (an update in place that records the arguments and gives the build its tags)
// instead of building it again. The import leaves a mark in the resource's private state,
// with the spec tag the build carries, until the first apply adopts or replaces it.

// importedKey is the private state key of that mark.
const importedKey = "imported"

// importedBuild is the mark's value.
type importedBuild struct {
	// SpecTag is the build's spec tag, "" when it has none (made without reuse).
	SpecTag string `json:"spec_tag"`
}

// privateState is what the framework's private state offers every plan modifier.
type privateState interface {
	GetKey(ctx context.Context, key string) ([]byte, diag.Diagnostics)
}

// importedMark returns the mark of a build imported and not yet adopted or replaced.
func importedMark(ctx context.Context, private privateState, diags *diag.Diagnostics) (importedBuild, bool) {
	var mark importedBuild
	if private == nil {
		return mark, false
	}
	raw, d := private.GetKey(ctx, importedKey)
	diags.Append(d...)
	if len(raw) == 0 {
		return mark, false
	}
	if err := json.Unmarshal(raw, &mark); err != nil {
		diags.AddError("Reading the import mark of a build", err.Error()+"; this is a bug in the provider.")
	}
	return mark, true
}

// markImported finds the spec tag of the imported build buildID and leaves the mark.
func markImported(ctx context.Context, api *e2bapi.Client, templateID, buildID string, resp *resource.ImportStateResponse) {
	tags, err := api.ListTags(ctx, templateID)
	if err != nil {
		resp.Diagnostics.AddError("Reading the tags of template "+templateID, err.Error())
		return
	}
	var mark importedBuild
	if i := slices.IndexFunc(tags, func(t e2b.TemplateTag) bool {
		return t.BuildID == buildID && strings.HasPrefix(t.Tag, templatebuild.SpecTagPrefix)
	}); i >= 0 {
		mark.SpecTag = tags[i].Tag
	}
	raw, err := json.Marshal(mark)
	if err != nil {
		resp.Diagnostics.AddError("Marking the imported build", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, importedKey, raw)...)
}

// planImported plans an imported build: adopted when specHash (known) is the build's spec
// tag's, else replaced, with a warning that says why and how to avoid it.
func planImported(mark importedBuild, specHash types.String, state *templateBuildModel, resp *resource.ModifyPlanResponse) {
	buildID := state.BuildID.ValueString()
	if !specHash.IsUnknown() && mark.SpecTag != "" && mark.SpecTag == templatebuild.SpecTag(specHash.ValueString()) {
		resp.Diagnostics.AddAttributeWarning(path.Root("build_id"), "Adopting an imported build",
			fmt.Sprintf("Build %s carries the spec tag %s, which this configuration's spec_hash makes: it is the build "+
				"this configuration describes. Apply records the configuration in the state and gives the build its "+
				"tags; nothing is built.", buildID, mark.SpecTag))
		return
	}
	var why string
	switch {
	case mark.SpecTag == "":
		why = "It carries no spec tag: it was built without `reuse`, so nothing tells what it was made from."
	case specHash.IsUnknown():
		why = fmt.Sprintf("It carries the spec tag %s, but this configuration's spec_hash is not known until apply.", mark.SpecTag)
	default:
		why = fmt.Sprintf("It carries the spec tag %s, made from another configuration: this one's is %s.",
			mark.SpecTag, templatebuild.SpecTag(specHash.ValueString()))
	}
	resp.RequiresReplace = append(resp.RequiresReplace, path.Root("spec_hash"))
	resp.Diagnostics.AddAttributeWarning(path.Root("build_id"), "Imported build will be built again",
		"E2B keeps no build inputs, so imported build "+buildID+" matches a configuration only through its spec tag. "+why+
			" Builds made with `reuse = true` carry their spec hash as the tag spec-<first 16 hex>; importing such a "+
			"build into a configuration with the same spec_hash builds nothing.")
}

// replaceUnlessImported is RequiresReplace for the arguments of e2b_template_build,
// except on the first plan of an imported build, which has none of them in its state:
// that plan adopts or replaces the build as a whole (planImported).
type replaceUnlessImported struct{}

var (
	_ planmodifier.String = replaceUnlessImported{}
	_ planmodifier.List   = replaceUnlessImported{}
	_ planmodifier.Map    = replaceUnlessImported{}
	_ planmodifier.Set    = replaceUnlessImported{}
	_ planmodifier.Int64  = replaceUnlessImported{}
	_ planmodifier.Object = replaceUnlessImported{}
)

func (replaceUnlessImported) Description(context.Context) string {
	return "A change replaces the build, unless it was just imported and its spec tag matches."
}

func (m replaceUnlessImported) MarkdownDescription(ctx context.Context) string {
	return m.Description(ctx)
}

// requires is whether a change of one argument replaces the build.
func (replaceUnlessImported) requires(ctx context.Context, createOrDestroy, unchanged bool, private privateState, diags *diag.Diagnostics) bool {
	if createOrDestroy || unchanged {
		return false
	}
	_, imported := importedMark(ctx, private, diags)
	return !imported
}

func (m replaceUnlessImported) PlanModifyString(ctx context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	resp.RequiresReplace = m.requires(ctx, req.State.Raw.IsNull() || req.Plan.Raw.IsNull(), req.PlanValue.Equal(req.StateValue), req.Private, &resp.Diagnostics)
}

func (m replaceUnlessImported) PlanModifyList(ctx context.Context, req planmodifier.ListRequest, resp *planmodifier.ListResponse) {
	resp.RequiresReplace = m.requires(ctx, req.State.Raw.IsNull() || req.Plan.Raw.IsNull(), req.PlanValue.Equal(req.StateValue), req.Private, &resp.Diagnostics)
}

func (m replaceUnlessImported) PlanModifyMap(ctx context.Context, req planmodifier.MapRequest, resp *planmodifier.MapResponse) {
	resp.RequiresReplace = m.requires(ctx, req.State.Raw.IsNull() || req.Plan.Raw.IsNull(), req.PlanValue.Equal(req.StateValue), req.Private, &resp.Diagnostics)
}

func (m replaceUnlessImported) PlanModifySet(ctx context.Context, req planmodifier.SetRequest, resp *planmodifier.SetResponse) {
	resp.RequiresReplace = m.requires(ctx, req.State.Raw.IsNull() || req.Plan.Raw.IsNull(), req.PlanValue.Equal(req.StateValue), req.Private, &resp.Diagnostics)
}

func (m replaceUnlessImported) PlanModifyInt64(ctx context.Context, req planmodifier.Int64Request, resp *planmodifier.Int64Response) {
	resp.RequiresReplace = m.requires(ctx, req.State.Raw.IsNull() || req.Plan.Raw.IsNull(), req.PlanValue.Equal(req.StateValue), req.Private, &resp.Diagnostics)
}

func (m replaceUnlessImported) PlanModifyObject(ctx context.Context, req planmodifier.ObjectRequest, resp *planmodifier.ObjectResponse) {
	resp.RequiresReplace = m.requires(ctx, req.State.Raw.IsNull() || req.Plan.Raw.IsNull(), req.PlanValue.Equal(req.StateValue), req.Private, &resp.Diagnostics)
}
