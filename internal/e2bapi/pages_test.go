package e2bapi

import (
	"context"
	"errors"
	"fmt"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// listed is a list item of GET /v2/templates as the spec has it.
func listed(id, alias string) e2b.Template {
	return e2b.Template{TemplateID: id, BuildID: testBuildID, CPUCount: 2, MemoryMB: 1024, DiskSizeMB: 5120, Names: []string{"team/" + alias},
		Aliases: []string{alias}, CreatedAt: testTime, UpdatedAt: testTime, BuildStatus: e2b.BuildReady, EnvdVersion: "0.6.13"}
}

// pagedTemplates is a stand-in of GET /v2/templates over seven templates that pages as E2B
// does: limit items after the template named by nextToken, X-Next-Token while more
// remain. block, when not nil, holds the answer of any page after the first until the
// request's context ends.
func pagedTemplates(t *testing.T, block chan struct{}) *apiServer {
	t.Helper()
	items := make([]e2b.Template, 7)
	for i := range items {
		items[i] = listed(fmt.Sprintf("tpl%017d", i), fmt.Sprintf("t%d", i))
	}
	return newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v2/templates" {
			writeJSON(w, 404, e2b.Error{Code: 404, Message: "not found"})
			return
		}
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		start := 0
		if token := r.URL.Query().Get("nextToken"); token != "" {
			if block != nil {
				close(block)
				<-r.Context().Done()
				return
			}
			start = slices.IndexFunc(items, func(t e2b.Template) bool { return t.TemplateID == token }) + 1
		}
		end := min(start+limit, len(items))
		if end < len(items) {
			w.Header().Set("X-Next-Token", items[end-1].TemplateID)
		}
		writeJSON(w, 200, items[start:end])
	})
}

func TestTemplatesPages(t *testing.T) {
	srv := pagedTemplates(t, nil)
	c, _ := newTestClient(t, srv, nil)
	var got []string
	for tpl, err := range c.Templates(t.Context(), 3) {
		if err != nil {
			t.Fatalf("Templates: %v", err)
		}
		got = append(got, tpl.Aliases[0])
	}
	if want := "t0 t1 t2 t3 t4 t5 t6"; strings.Join(got, " ") != want {
		t.Errorf("templates %v, want %s", got, want)
	}
	var queries []string
	for _, r := range srv.requests() {
		queries = append(queries, r.Query)
	}
	want := []string{"limit=3", "limit=3&nextToken=tpl00000000000000002", "limit=3&nextToken=tpl00000000000000005"}
	if !slices.Equal(queries, want) {
		t.Errorf("queries %q, want %q", queries, want)
	}
}

// TestTemplatesStops asks for no page after the loop stops or ctx is cancelled, and a
// page in flight ends with ctx's error.
func TestTemplatesStops(t *testing.T) {
	t.Run("break", func(t *testing.T) {
		srv := pagedTemplates(t, nil)
		c, _ := newTestClient(t, srv, nil)
		for tpl, err := range c.Templates(t.Context(), 3) {
			if err != nil || tpl.Aliases[0] == "t1" {
				break
			}
		}
		if n := srv.count(http.MethodGet, "/v2/templates"); n != 1 {
			t.Errorf("%d pages asked for, want 1", n)
		}
	})
	t.Run("cancel between pages", func(t *testing.T) {
		srv := pagedTemplates(t, nil)
		c, _ := newTestClient(t, srv, nil)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var errs []error
		for tpl, err := range c.Templates(ctx, 3) {
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if tpl.Aliases[0] == "t2" {
				cancel()
			}
		}
		if len(errs) != 1 || !errors.Is(errs[0], context.Canceled) {
			t.Errorf("errors %v, want one context.Canceled", errs)
		}
		if n := srv.count(http.MethodGet, "/v2/templates"); n != 1 {
			t.Errorf("%d pages asked for, want 1", n)
		}
	})
	t.Run("cancel during a page", func(t *testing.T) {
		asked := make(chan struct{})
		srv := pagedTemplates(t, asked)
		c, _ := newTestClient(t, srv, nil)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() { <-asked; cancel() }()
		n, errs := 0, []error{}
		for _, err := range c.Templates(ctx, 3) {
			if err != nil {
				errs = append(errs, err)
				continue
			}
			n++
		}
		if n != 3 || len(errs) != 1 || !errors.Is(errs[0], context.Canceled) {
			t.Errorf("%d templates and errors %v, want 3 and one context.Canceled", n, errs)
		}
	})
}

func TestTemplatesRefusesEndlessPaging(t *testing.T) {
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Next-Token", "same")
		writeJSON(w, 200, []e2b.Template{listed(testTemplate, "t")})
	})
	c, _ := newTestClient(t, srv, nil)
	var last error
	for _, err := range c.Templates(t.Context(), 0) {
		last = err
	}
	if last == nil || !strings.Contains(last.Error(), "same page again") {
		t.Errorf("error %v, want the same page again", last)
	}
	if n := srv.count(http.MethodGet, "/v2/templates"); n != 2 {
		t.Errorf("%d pages asked for, want 2", n)
	}
	for _, err := range c.Templates(t.Context(), MaxTemplatePage+1) {
		if err == nil || !strings.Contains(err.Error(), "page size 101") {
			t.Errorf("error %v, want the page size named", err)
		}
	}
}

// TestTemplateBuildsPages pages through a template's builds as E2B answers them: one page
// of builds in each GET /templates/{id}, X-Next-Token while more remain.
func TestTemplateBuildsPages(t *testing.T) {
	builds := make([]e2b.TemplateBuild, 5)
	for i := range builds {
		builds[i] = e2b.TemplateBuild{BuildID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), Status: e2b.BuildReady,
			CreatedAt: testTime, UpdatedAt: testTime, CPUCount: 2, MemoryMB: 1024}
	}
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		start := 0
		if token := r.URL.Query().Get("nextToken"); token != "" {
			start = slices.IndexFunc(builds, func(b e2b.TemplateBuild) bool { return b.BuildID == token }) + 1
		}
		end := min(start+limit, len(builds))
		if end < len(builds) {
			w.Header().Set("X-Next-Token", builds[end-1].BuildID)
		}
		writeJSON(w, 200, e2b.TemplateWithBuilds{TemplateID: "tpl00000000000000000", Aliases: []string{"t"}, Names: []string{"team/t"},
			CreatedAt: testTime, UpdatedAt: testTime, Builds: builds[start:end]})
	})
	c, _ := newTestClient(t, srv, nil)
	var got []string
	for b, err := range c.TemplateBuilds(t.Context(), "tpl00000000000000000", 2) {
		if err != nil {
			t.Fatalf("TemplateBuilds: %v", err)
		}
		got = append(got, b.BuildID[len(b.BuildID)-1:])
	}
	if strings.Join(got, " ") != "0 1 2 3 4" {
		t.Errorf("builds %v, want 0 to 4", got)
	}
	if n := srv.count(http.MethodGet, "/templates/tpl00000000000000000"); n != 3 {
		t.Errorf("%d pages asked for, want 3", n)
	}
}
