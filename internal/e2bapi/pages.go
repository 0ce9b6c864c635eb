package e2bapi

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// MaxTemplatePage is the largest page GET /v2/templates and GET /templates/{id} answer
// (limit 1..100).
const MaxTemplatePage = 100

// Templates yields the team's templates (snapshots excepted, as E2B lists them) page by
// page: GET /v2/templates with limit pageSize (MaxTemplatePage when 0) and the nextToken
// of the page before, until a page comes without X-Next-Token. A page is asked for only
// when the loop wants more, so stopping the loop or cancelling ctx asks for no other
// page. An error (ctx's included) is yielded once and ends the sequence.
func (c *Client) Templates(ctx context.Context, pageSize int) iter.Seq2[e2b.Template, error] {
	return pages(ctx, c, "/v2/templates", pageSize, func(page *[]e2b.Template) []e2b.Template { return *page })
}

// TemplateBuilds yields the builds of the template templateID (an ID: E2B resolves no
// names here), newest first as E2B lists them, page by page as Templates does: GET
// /templates/{id}, whose answer holds one page of builds.
func (c *Client) TemplateBuilds(ctx context.Context, templateID string, pageSize int) iter.Seq2[e2b.TemplateBuild, error] {
	id, err := segment("template ID", templateID)
	if err != nil {
		return func(yield func(e2b.TemplateBuild, error) bool) { yield(e2b.TemplateBuild{}, err) }
	}
	return pages(ctx, c, "/templates/"+id, pageSize, func(page *e2b.TemplateWithBuilds) []e2b.TemplateBuild { return page.Builds })
}

// pages yields the items of the pages of path, each answer a P whose items are items(P).
func pages[P, T any](ctx context.Context, c *Client, path string, pageSize int, items func(*P) []T) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		if pageSize < 0 || pageSize > MaxTemplatePage {
			yield(zero, fmt.Errorf("page size %d is not from 1 to %d", pageSize, MaxTemplatePage))
			return
		}
		if pageSize == 0 {
			pageSize = MaxTemplatePage
		}
		query := url.Values{"limit": {strconv.Itoa(pageSize)}}
		for {
			if err := ctx.Err(); err != nil {
				yield(zero, err)
				return
			}
			var answer P
			header, err := c.exchange(ctx, http.MethodGet, path, query, nil, &answer)
			if err != nil {
				yield(zero, err)
				return
			}
			page := items(&answer)
			for _, t := range page {
				if !yield(t, nil) {
					return
				}
			}
			next := header.Get("X-Next-Token")
			if next == "" {
				return
			}
			if next == query.Get("nextToken") || len(page) == 0 {
				// A server that hands back the token it was given, or an empty page with
				// a token, would be asked forever.
				yield(zero, fmt.Errorf("E2B API GET %s: the page after token %q names the same page again", path, query.Get("nextToken")))
				return
			}
			query.Set("nextToken", next)
		}
	}
}
