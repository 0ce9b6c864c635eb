package provider

import (
	"context"
	"iter"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/list"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
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
func (f templateFilter) matches(t e2b.Template) bool {
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
func eachTemplate(ctx context.Context, api *e2bapi.Client, f templateFilter, pageSize int, yield func(e2b.Template) bool) error {
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

// listStream is a list resource's stream: the list configuration read into config, then
// the results each pushes, up to req.Limit; an error each returns ends the list with
// summary.
func listStream(ctx context.Context, data *ProviderData, req list.ListRequest, config any, summary string,
	each func(ctx context.Context, api *e2bapi.Client, push func(list.ListResult) bool) error) iter.Seq[list.ListResult] {
	diags := req.Config.Get(ctx, config)
	api := apiOrError(data, &diags)
	if diags.HasError() {
		return list.ListResultsStreamDiagnostics(diags)
	}
	ctx = data.logContext(ctx)
	return func(push func(list.ListResult) bool) {
		sent := int64(0)
		err := each(ctx, api, func(result list.ListResult) bool {
			sent++
			return push(result) && (req.Limit <= 0 || sent < req.Limit)
		})
		if err != nil {
			var d diag.Diagnostics
			d.AddError(summary, err.Error())
			push(list.ListResult{Diagnostics: d})
		}
	}
}
