package provider

import (
	"fmt"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// defaultTagPlans sees the plans of one provider instance that decide a template's
// default tag: e2b_alias resources on `default`, and new e2b_template_build resources
// without tags, which E2B tags `default` themselves the moment they are ready, bypassing
// the alias and its gate. Terraform names no resource to a provider and plans them in any
// order, in parallel, so each plan records what it decides and whichever of the two
// plans second warns. A template is matched by its ID, or by a name an e2b_template plan
// has paired with that ID; values unknown at plan (a template created by the same apply)
// match nothing. Another provider instance (an aliased provider block, another root
// module) is not seen.
type defaultTagPlans struct {
	mu sync.Mutex
	// builds are the template IDs of builds planned without tags.
	builds map[string]bool
	// aliases are the templates, as written (name or ID), of aliases on default.
	aliases map[string]bool
	// ids are the template IDs of the template names planned.
	ids map[string]string
}

func newDefaultTagPlans() *defaultTagPlans {
	return &defaultTagPlans{builds: map[string]bool{}, aliases: map[string]bool{}, ids: map[string]string{}}
}

// template records that the template named name has the ID id.
func (p *defaultTagPlans) template(name, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ids[name] = id
}

// build records a build without tags of templateID and reports whether an alias on
// default of that template was planned.
func (p *defaultTagPlans) build(templateID string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.builds[templateID] = true
	for ref := range p.aliases {
		if p.resolve(ref) == templateID {
			return true
		}
	}
	return false
}

// alias records an alias on default of template and reports whether a build of that
// template without tags was planned.
func (p *defaultTagPlans) alias(template string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.aliases[template] = true
	return p.builds[p.resolve(template)]
}

// resolve is the template ID of ref, a name or an ID; p.mu is held.
func (p *defaultTagPlans) resolve(ref string) string {
	if id, ok := p.ids[ref]; ok {
		return id
	}
	return ref
}

// recordTemplatePlan records the name and ID of a planned e2b_template, once both are known.
func (d *ProviderData) recordTemplatePlan(name, id types.String) {
	if d == nil || d.defaultTag == nil || !known(name) || !known(id) {
		return
	}
	d.defaultTag.template(name.ValueString(), id.ValueString())
}

// recordBuildPlan records a new e2b_template_build; without tags it takes default, which
// warns when an alias on default of its template is planned too.
func (d *ProviderData) recordBuildPlan(templateID types.String, tags types.Set) (diags diag.Diagnostics) {
	if d == nil || d.defaultTag == nil || !known(templateID) || tags.IsUnknown() || len(tags.Elements()) > 0 {
		return diags
	}
	if d.defaultTag.build(templateID.ValueString()) {
		diags.AddAttributeWarning(path.Root("tags"), "Build takes the default tag before e2b_alias",
			fmt.Sprintf("This build has no tags, so E2B points the default tag of template %s at it as soon as it is "+
				"ready, ahead of the e2b_alias on default of that template in this configuration (and of its gate). "+
				"Give the build tags, such as [\"candidate\"], and let the alias move default.", templateID.ValueString()))
	}
	return diags
}

// recordAliasPlan records an e2b_alias; on default it warns when a build without tags of
// its template is planned too.
func (d *ProviderData) recordAliasPlan(template, tag types.String) (diags diag.Diagnostics) {
	if d == nil || d.defaultTag == nil || !known(template) || tag.ValueString() != e2b.DefaultTag {
		return diags
	}
	if d.defaultTag.alias(template.ValueString()) {
		diags.AddAttributeWarning(path.Root("tag"), "A build takes the default tag before this alias",
			fmt.Sprintf("An e2b_template_build of template %s in this configuration has no tags, so E2B points the "+
				"default tag at it as soon as it is ready, bypassing this alias and its gate. Give that build tags, "+
				"such as [\"candidate\"], and let the alias move default.", template.ValueString()))
	}
	return diags
}

func known(v types.String) bool { return !v.IsNull() && !v.IsUnknown() }
