package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The identities of the resources: what names one of them for an import block's
// `identity` (Terraform and OpenTofu 1.12+) and in the results of the list resources,
// beside the import IDs of before. Each holds what the API addresses the object by, and
// none changes while the object exists.

// templateIdentity is e2b_template's: its ID. An import may give a name instead.
type templateIdentity struct {
	ID types.String `tfsdk:"id"`
}

// aliasIdentity is e2b_alias's: the template as the configuration names it, and the tag.
type aliasIdentity struct {
	Template types.String `tfsdk:"template"`
	Tag      types.String `tfsdk:"tag"`
}

// buildIdentity is e2b_template_build's: the template's ID and the build's.
type buildIdentity struct {
	TemplateID types.String `tfsdk:"template_id"`
	BuildID    types.String `tfsdk:"build_id"`
}

func templateIdentitySchema() identityschema.Schema {
	return identityschema.Schema{Attributes: map[string]identityschema.Attribute{
		"id": identityschema.StringAttribute{
			Description:       "Template ID. An import may give the template's name (`name` or `team/name`) instead; the identity then holds the ID.",
			RequiredForImport: true,
		},
	}}
}

func aliasIdentitySchema() identityschema.Schema {
	return identityschema.Schema{Attributes: map[string]identityschema.Attribute{
		"template": identityschema.StringAttribute{
			Description:       "Template name (or ID) the tag belongs to, as the alias's `template` argument names it.",
			RequiredForImport: true,
		},
		"tag": identityschema.StringAttribute{Description: "The tag.", RequiredForImport: true},
	}}
}

func buildIdentitySchema() identityschema.Schema {
	return identityschema.Schema{Attributes: map[string]identityschema.Attribute{
		"template_id": identityschema.StringAttribute{Description: "ID of the template the build belongs to.", RequiredForImport: true},
		"build_id":    identityschema.StringAttribute{Description: "Build ID (a UUID).", RequiredForImport: true},
	}}
}

// importedIdentity reads the identity an import block gave into into, and reports
// whether there was one: false for an import by ID (the import command or an import
// block's `id`).
func importedIdentity(ctx context.Context, req resource.ImportStateRequest, into any, diags *diag.Diagnostics) bool {
	if req.ID != "" || req.Identity == nil || req.Identity.Raw.IsNull() {
		return false
	}
	diags.Append(req.Identity.Get(ctx, into)...)
	return true
}

// The identity of every object, on every path: each identity attribute is the
// string state attribute of the same name (TestResourceIdentity_namesStateAttributes),
// so the identity is taken from the state, and each Create, Read, Update and
// ImportState defers one of the functions below as its first statement. The framework
// fails an operation that ends without errors and with a null identity, whatever the
// CLI: one before 1.12 never sends an identity, nor does one holding a state an earlier
// release wrote, so a Read that removes the object (deleted or failed outside
// Terraform) takes it from the prior state.

// identityAfterCreate sets the identity of what Create saved, also of a build saved
// before it failed (tainted, then read and replaced).
func identityAfterCreate(ctx context.Context, resp *resource.CreateResponse) {
	resp.Diagnostics.Append(identityFromState(ctx, resp.State, resp.Identity)...)
}

// identityAfterRead keeps the identity the CLI sent, which must not change; without
// one it takes it from the new state or, when Read removed the object, the prior one.
func identityAfterRead(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	if resp.Identity == nil || !resp.Identity.Raw.IsFullyNull() {
		return
	}
	state := resp.State
	if state.Raw.IsNull() {
		state = req.State
	}
	resp.Diagnostics.Append(identityFromState(ctx, state, resp.Identity)...)
}

// identityAfterUpdate keeps the planned identity (the prior state's); without one (a
// CLI before 1.12, a state an earlier release wrote) it takes it from the new state.
func identityAfterUpdate(ctx context.Context, resp *resource.UpdateResponse) {
	if resp.Identity == nil || !resp.Identity.Raw.IsFullyNull() {
		return
	}
	resp.Diagnostics.Append(identityFromState(ctx, resp.State, resp.Identity)...)
}

// identityAfterImport sets the identity of the imported state: an import by a
// template's name ends with the template's ID in both.
func identityAfterImport(ctx context.Context, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(identityFromState(ctx, resp.State, resp.Identity)...)
}

// identityFromState sets identity's attributes to state's of the same names; a null
// state (nothing saved) leaves it as it is.
func identityFromState(ctx context.Context, state tfsdk.State, identity *tfsdk.ResourceIdentity) (diags diag.Diagnostics) {
	if identity == nil || state.Raw.IsNull() {
		return nil
	}
	for name := range identity.Schema.GetAttributes() {
		var v types.String
		diags.Append(state.GetAttribute(ctx, path.Root(name), &v)...)
		diags.Append(identity.SetAttribute(ctx, path.Root(name), v)...)
	}
	return diags
}
