package provider

import (
	"context"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/list"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

// The team's templates as E2B's list answers them (GET /v2/templates, paged by
// e2bapi.Templates), filtered the same way for the list resources and data "e2b_templates".

// Descriptions of the filters, shared by the list resources and the data source.
const (
	namePrefixDescription = "Only templates one of whose names starts with this: the name (`my-app`) or the " +
		"team-qualified name (`team/my-app`)."
	publicFilterDescription = "Only public templates (`true`) or only private ones (`false`); both when unset."
)

// templateFilter is the filters' configuration.
type templateFilter struct {
	NamePrefix types.String `tfsdk:"name_prefix"`
	Public     types.Bool   `tfsdk:"public"`
}

// matches reports whether t passes the filters.
func (f templateFilter) matches(t e2bapi.Template) bool {
	if !f.Public.IsNull() && t.Public != f.Public.ValueBool() {
		return false
	}
	prefix := f.NamePrefix.ValueString()
	if prefix == "" {
		return true
	}
	for _, names := range [][]string{t.Aliases, t.Names} {
		for _, n := range names {
			if strings.HasPrefix(n, prefix) {
				return true
			}
		}
	}
	return false
}

// eachTemplate calls yield with every template of the team that passes f, page by page,
// pageSize (0: E2B's largest) templates a page, until yield returns false or an error
// (ctx's included) ends the list; it returns that error.
func eachTemplate(ctx context.Context, api *e2bapi.Client, f templateFilter, pageSize int, yield func(e2bapi.Template) bool) error {
	for t, err := range api.Templates(ctx, pageSize) {
		if err != nil {
			return err
		}
		if f.matches(t) && !yield(t) {
			return nil
		}
	}
	return nil
}

// templateName is the name a template's e2b_template takes when imported by ID: its
// alias, else its first full name.
func templateName(aliases, names []string) string {
	switch {
	case len(aliases) > 0:
		return aliases[0]
	case len(names) > 0:
		return names[0]
	}
	return ""
}

// pageSizeFor is the page size for a list whose caller wants at most limit results: no
// page larger than that, nor than E2B's largest.
func pageSizeFor(limit int64) int {
	if limit <= 0 || limit > e2bapi.MaxTemplatePage {
		return e2bapi.MaxTemplatePage
	}
	return int(limit)
}

// pushError ends a list with an error; it returns false, for callers that stop there.
func pushError(push func(list.ListResult) bool, summary string, err error) bool {
	var d diag.Diagnostics
	d.AddError(summary, err.Error())
	push(list.ListResult{Diagnostics: d})
	return false
}
