package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/querycheck"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// listServer is the provider served over tfprotov6 in process and configured for a
// local server: what the list resources answer Terraform 1.14's `terraform query`,
// which cannot be built here.
type listServer struct {
	tfprotov6.ListResourceServer
	*servedProvider
}

func newListServer(t *testing.T, ctx context.Context, srv *acctest.Server) *listServer {
	t.Helper()
	server := configuredServer(t, ctx, srv)
	lister, ok := server.ProviderServer.(tfprotov6.ListResourceServer)
	if !ok {
		t.Fatalf("the provider server %T serves no list resources", server.ProviderServer)
	}
	return &listServer{ListResourceServer: lister, servedProvider: server}
}

// listed is one list result, decoded: its display name, identity and resource
// attributes (strings and bools as Go values; nil when absent), or its diagnostics.
type listed struct {
	name     string
	identity map[string]any
	resource map[string]any
	errors   []string
}

// list runs the list resource typeName with config (attributes of its list schema) and
// returns its results; each result is passed to seen first, which may cancel ctx.
func (s *listServer) list(t *testing.T, ctx context.Context, typeName string, config map[string]tftypes.Value, include bool, limit int64, seen func(listed)) []listed {
	t.Helper()
	cfg := dynamicValue(t, s.schemas.ListResourceSchemas[typeName].ValueType(), config)
	stream, err := s.ListResource(ctx, &tfprotov6.ListResourceRequest{TypeName: typeName, Config: cfg, IncludeResource: include, Limit: limit})
	acctest.Must(t, err)
	var out []listed
	for r := range stream.Results {
		var l listed
		l.name = r.DisplayName
		for _, d := range r.Diagnostics {
			l.errors = append(l.errors, d.Summary+": "+d.Detail)
		}
		if r.Identity != nil {
			l.identity = decode(t, r.Identity.IdentityData, s.identities.IdentitySchemas[typeName].ValueType())
		}
		if r.Resource != nil {
			l.resource = decode(t, r.Resource, s.schemas.ResourceSchemas[typeName].ValueType())
		}
		if seen != nil {
			seen(l)
		}
		out = append(out, l)
	}
	return out
}

// decode is the string, bool and list attributes of an object value.
func decode(t *testing.T, dv *tfprotov6.DynamicValue, typ tftypes.Type) map[string]any {
	t.Helper()
	v, err := dv.Unmarshal(typ)
	acctest.Must(t, err)
	var attrs map[string]tftypes.Value
	acctest.Must(t, v.As(&attrs))
	out := map[string]any{}
	for name, a := range attrs {
		var s string
		var b bool
		switch {
		case a.IsNull():
			out[name] = nil
		case a.Type().Is(tftypes.String):
			acctest.Must(t, a.As(&s))
			out[name] = s
		case a.Type().Is(tftypes.Bool):
			acctest.Must(t, a.As(&b))
			out[name] = b
		default:
			out[name] = a.String()
		}
	}
	return out
}

func names(results []listed) string {
	var out []string
	for _, r := range results {
		if len(r.errors) > 0 {
			out = append(out, "error: "+strings.Join(r.errors, "; "))
			continue
		}
		out = append(out, r.name)
	}
	return strings.Join(out, " ")
}

// TestAccTemplateList_paging lists a server's templates through the protocol with
// filters and limits that page (a page is no larger than the limit): the names, the
// identities and, with include_resource, the resources an import by ID reads; a cancel
// mid-way ends the list with the context's error.
func TestAccTemplateList_paging(t *testing.T) {
	accPreCheck(t)
	srv := acctest.Another(t)
	api := testAPI(t, srv)
	ids := map[string]string{}
	team := ""
	for _, name := range []string{"app-0", "app-1", "app-2", "app-3", "app-4", "other-0", "other-1"} {
		reg, err := api.CreateTemplateBuild(t.Context(), e2b.TemplateBuildRequestV3{Name: name})
		acctest.Must(t, err)
		ids[name] = reg.TemplateID
		team, _, _ = strings.Cut(reg.Names[0], "/")
		if name == "app-1" || name == "app-3" {
			public := true
			_, err := api.UpdateTemplate(t.Context(), reg.TemplateID, e2b.TemplateUpdateRequest{Public: &public})
			acctest.Must(t, err)
		}
	}
	s := newListServer(t, t.Context(), srv)
	str := func(v string) tftypes.Value { return tftypes.NewValue(tftypes.String, v) }
	cases := []struct {
		name   string
		config map[string]tftypes.Value
		limit  int64
		want   string
	}{
		{"all", nil, 0, "app-0 app-1 app-2 app-3 app-4 other-0 other-1"},
		{"limit", nil, 3, "app-0 app-1 app-2"},
		{"public across pages", map[string]tftypes.Value{"public": tftypes.NewValue(tftypes.Bool, true)}, 2, "app-1 app-3"},
		{"private", map[string]tftypes.Value{"public": tftypes.NewValue(tftypes.Bool, false)}, 0, "app-0 app-2 app-4 other-0 other-1"},
		{"prefix on the last pages", map[string]tftypes.Value{"name_prefix": str("other-")}, 2, "other-0 other-1"},
		{"team-qualified prefix", map[string]tftypes.Value{"name_prefix": str(team + "/app-4")}, 0, "app-4"},
		{"nothing", map[string]tftypes.Value{"name_prefix": str("none-")}, 2, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := s.list(t, t.Context(), "e2b_template", c.config, false, c.limit, nil)
			if names(got) != c.want {
				t.Fatalf("listed %q, want %q", names(got), c.want)
			}
			for _, r := range got {
				if r.identity["id"] != ids[r.name] || r.resource != nil {
					t.Errorf("%s: identity %v and resource %v, want id %s and no resource", r.name, r.identity, r.resource, ids[r.name])
				}
			}
		})
	}
	t.Run("include_resource", func(t *testing.T) {
		got := s.list(t, t.Context(), "e2b_template", map[string]tftypes.Value{"name_prefix": str("app-3")}, true, 0, nil)
		if len(got) != 1 || got[0].resource == nil {
			t.Fatalf("listed %+v, want app-3 with its resource", got)
		}
		r := got[0].resource
		if r["id"] != ids["app-3"] || r["name"] != "app-3" || r["public"] != true || !strings.Contains(fmt.Sprint(r["names"]), "app-3") || r["created_at"] == nil {
			t.Errorf("resource %v, want app-3 as an import reads it", r)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		// Pages of 2: other-0 is on the third page, other-1 on the fourth, never asked for.
		got := s.list(t, ctx, "e2b_template", map[string]tftypes.Value{"name_prefix": str("other-")}, false, 2, func(l listed) {
			if l.name == "other-0" {
				cancel()
			}
		})
		if n := names(got); !strings.HasPrefix(n, "other-0 error: Listing templates: ") || !strings.Contains(n, "context canceled") {
			t.Errorf("listed %q, want other-0 and the cancel", n)
		}
	})
}

// cliVersion is the version the Terraform or OpenTofu CLI at path reports, such as
// "1.12.6", and whether it is at least 1.minor.
func cliVersion(t *testing.T, path string, minor int) (string, bool) {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), path, "version", "-json").Output()
	var v struct {
		Version string `json:"terraform_version"`
	}
	if err != nil || json.Unmarshal(out, &v) != nil {
		t.Fatalf("%s version -json: %v\n%s", path, err, out)
	}
	var major, got int
	if _, err := fmt.Sscanf(v.Version, "%d.%d", &major, &got); err != nil {
		t.Fatalf("%s reports version %q", path, v.Version)
	}
	return v.Version, major > 1 || (major == 1 && got >= minor)
}

// terraform114 is a Terraform CLI on PATH that has feature (`terraform query`, actions),
// which came with 1.14. None is required (the pinned CLIs have neither, and 1.14 cannot be
// built from the Go module proxy), so without one the test is skipped, whatever
// E2B_TEST_REQUIRE_ALL says.
func terraform114(t *testing.T, feature string) string {
	t.Helper()
	cli, err := exec.LookPath("terraform")
	if err != nil {
		t.Skipf("no terraform on PATH; %s needs Terraform 1.14 or later", feature)
	}
	if version, ok := cliVersion(t, cli, 14); !ok {
		t.Skipf("%s is Terraform %s; %s needs 1.14 or later", cli, version, feature)
	}
	return cli
}

// TestAccTemplateList_query lists a template with `terraform query`, when a Terraform
// 1.14+ is on PATH.
func TestAccTemplateList_query(t *testing.T) {
	t.Setenv("TF_ACC_TERRAFORM_PATH", terraform114(t, "terraform query"))
	srv := localServer(t)
	name := uniqueName("acc-query")
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{Config: templateConfig(srv.ProviderConfig(), name, false)},
			{
				Query: true,
				Config: srv.ProviderConfig() + fmt.Sprintf(`
list "e2b_template" "found" {
  provider         = e2b
  include_resource = true
  config {
    name_prefix = %q
  }
}
`, name),
				QueryResultChecks: []querycheck.QueryResultCheck{
					querycheck.ExpectLength("e2b_template.found", 1),
					querycheck.ExpectIdentity("e2b_template.found", map[string]knownvalue.Check{
						"id": knownvalue.StringRegexp(regexp.MustCompile(`^[a-z0-9]{20}$`)),
					}),
				},
			},
		},
	})
}
