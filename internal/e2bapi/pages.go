package e2bapi

import (
	"context"
	"fmt"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"iter"
	"net/http"
	"net/url"
	"strconv"
)

// MaxTemplatePage is the largest page GET /v2/templates answers (limit 1..100).
const MaxTemplatePage = 100

// Templates yields the team's templates (snapshots excepted, as E2B lists them) page by
// page: GET /v2/templates with limit pageSize (MaxTemplatePage when 0) and the nextToken
// of the page before, until a page comes without X-Next-Token. A page is asked for only
// when the loop wants more, so stopping the loop or cancelling ctx asks for no other
// page. An error (ctx's included) is yielded once and ends the sequence.
func (c *Client) Templates(ctx context.Context, pageSize int) iter.Seq2[e2b.Template, error] {
	return func(yield func(e2b.Template, error) bool) {
		if pageSize < 0 || pageSize > MaxTemplatePage {
			yield(e2b.Template{}, fmt.Errorf("template page size %d is not from 1 to %d", pageSize, MaxTemplatePage))
			return
		}
		if pageSize == 0 {
			pageSize = MaxTemplatePage
		}
		query := url.Values{"limit": {strconv.Itoa(pageSize)}}
		for {
			if err := ctx.Err(); err != nil {
				yield(e2b.Template{}, err)
				return
			}
			var page []e2b.Template
			header, err := c.exchange(ctx, http.MethodGet, "/v2/templates", query, nil, &page)
			if err != nil {
				yield(e2b.Template{}, err)
				return
			}
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
				yield(e2b.Template{}, fmt.Errorf("E2B API GET /v2/templates: the page after token %q names the same page again", query.Get("nextToken")))
				return
			}
			query.Set("nextToken", next)
		}
	}
}
