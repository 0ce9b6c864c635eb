package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// planChange plans an e2b_template_build that has a state: an imported build is adopted
// or replaced (template_build_import.go), a build whose content changed is replaced, and
// the same content at another path plans nothing.
func planChange(ctx context.Context, plan, state *templateBuildModel, hashes types.List, dockerfileHash, specHash types.String,
	private privateState, resp *resource.ModifyPlanResponse,
) {
	if mark, imported := importedMark(ctx, private, &resp.Diagnostics); imported {
		planImported(mark, specHash, state, resp)
		return
	}
	// What the build is made of is the files (copy_hashes) and the Dockerfile's content
	// (dockerfile_hash), never where they are. An imported build has no hashes in its
	// state: a known tree then replaces it too, since nothing says it matches.
	if !hashes.Equal(state.CopyHashes) {
		resp.RequiresReplace = append(resp.RequiresReplace, path.Root("copy_hashes"))
		return
	}
	if !dockerfileHash.Equal(state.DockerfileHash) {
		resp.RequiresReplace = append(resp.RequiresReplace, path.Root("dockerfile_hash"))
		return
	}
	// The same content at another path (another checkout, a CI runner): the plan keeps
	// the path the build was made from, so that nothing changes. Terraform accepts a
	// prior value in place of the configured one for this.
	for _, p := range []struct {
		name          string
		config, prior types.String
	}{{"context", plan.Context, state.Context}, {"dockerfile", plan.Dockerfile, state.Dockerfile}} {
		if !p.config.IsNull() && !p.prior.IsNull() && !p.config.Equal(p.prior) {
			resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root(p.name), p.prior)...)
		}
	}
	if state.Status.ValueString() == e2b.BuildBuilding {
		// An earlier apply stopped waiting: this one waits for the end.
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("status"), types.StringUnknown())...)
	}
}
