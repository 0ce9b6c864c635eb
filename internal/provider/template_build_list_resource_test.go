package provider

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/querycheck"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// TestAccTemplateBuildList_builds lists a template's builds through the protocol, in
// pages of one: the ready builds with their identities, status and tags in the display
// name, the failed one left out, and with include_resource the builds as an import reads
// them; a template that does not exist is an error.
func TestAccTemplateBuildList_builds(t *testing.T) {
	srv := localServer(t)
	name := uniqueName("acc-build-list")
	reg, err := testAPI(t, srv).CreateTemplateBuild(t.Context(), e2b.TemplateBuildRequestV3{Name: name})
	acctest.Must(t, err)
	o := outsideOf(t, srv)
	first, _ := o.build(&reg.TemplateID, srv.BaseImage, "true")
	second, _ := o.build(&reg.TemplateID, srv.BaseImage, "true", "v2")
	if _, failed := o.build(&reg.TemplateID, srv.BaseImage, "exit 3"); !failed {
		t.Fatal("the third build did not fail")
	}
	s := newListServer(t, t.Context(), srv)
	str := func(v string) tftypes.Value { return tftypes.NewValue(tftypes.String, v) }
	for _, limit := range []int64{0, 1} {
		got := s.list(t, t.Context(), "e2b_template_build", map[string]tftypes.Value{"template": str(name)}, true, limit, nil)
		want := map[string]string{first: "(ready; no tags; created ", second: "(ready; tags v2; created "}
		if limit == 1 {
			if len(got) != 1 {
				t.Fatalf("limit 1: listed %q", names(got))
			}
			continue
		}
		var ids []string
		for _, r := range got {
			id, _ := r.identity["build_id"].(string)
			ids = append(ids, id)
			if len(r.errors) > 0 || r.identity["template_id"] != reg.TemplateID || !strings.HasPrefix(r.name, name+":"+id+" "+want[id]) {
				t.Errorf("listed %q with identity %v, errors %q", r.name, r.identity, r.errors)
			}
			if r.resource["template_id"] != reg.TemplateID || r.resource["build_id"] != id || r.resource["id"] != id || r.resource["status"] != "ready" {
				t.Errorf("%s: resource %v, want the build as an import reads it", r.name, r.resource)
			}
		}
		slices.Sort(ids)
		wantIDs := []string{first, second}
		slices.Sort(wantIDs)
		if !slices.Equal(ids, wantIDs) {
			t.Errorf("listed builds %q, want the two ready ones %q", ids, wantIDs)
		}
	}
	missing := s.list(t, t.Context(), "e2b_template_build", map[string]tftypes.Value{"template": str(name + "-missing")}, false, 0, nil)
	if got := names(missing); !strings.HasPrefix(got, "error: Listing builds: No template has the ID or name") {
		t.Errorf("builds of a template that does not exist: listed %q, want the error", got)
	}
}

// TestAccTemplateBuildList_query lists a template's builds with `terraform query`, when a
// Terraform 1.14+ is on PATH.
func TestAccTemplateBuildList_query(t *testing.T) {
	t.Setenv("TF_ACC_TERRAFORM_PATH", terraform114(t, "terraform query"))
	srv := localServer(t)
	name := uniqueName("acc-build-query")
	config := templateBuild(srv, name, "b", srv.BaseImage, `  tags = ["v1"]`)
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{Config: config},
			{
				Query: true,
				Config: srv.ProviderConfig() + fmt.Sprintf(`
list "e2b_template_build" "found" {
  provider         = e2b
  include_resource = true
  config {
    template = %q
  }
}
`, name),
				QueryResultChecks: []querycheck.QueryResultCheck{
					querycheck.ExpectLength("e2b_template_build.found", 1),
					querycheck.ExpectIdentity("e2b_template_build.found", map[string]knownvalue.Check{
						"template_id": knownvalue.StringRegexp(regexp.MustCompile(`^[a-z0-9]{20}$`)),
						"build_id":    knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f-]{36}$`)),
					}),
				},
			},
		},
	})
}
