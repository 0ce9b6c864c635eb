package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
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

// setIdentity records v as a resource's identity; identity is nil for a CLI that has
// none (before 1.12).
func setIdentity(ctx context.Context, identity *tfsdk.ResourceIdentity, v any) diag.Diagnostics {
	if identity == nil {
		return nil
	}
	return identity.Set(ctx, v)
}
