package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// TestAccAliasList_tags lists the tags of a built template through the protocol, of that
// template and of every template: identities, names and, with include_resource, the
// aliases as an import reads them.
func TestAccAliasList_tags(t *testing.T) {
	srv := localServer(t)
	name := uniqueName("acc-alias-list")
	var buildID string
	check := serverCheck(func(ctx context.Context) error {
		s := newListServer(t, ctx, srv)
		want := fmt.Sprintf("%[1]s:default %[1]s:prod %[1]s:v1", name)
		one := s.list(t, ctx, "e2b_alias", map[string]tftypes.Value{"template": tftypes.NewValue(tftypes.String, name)}, true, 0, nil)
		if got := names(one); got != want {
			return fmt.Errorf("tags of %s: listed %q, want %q", name, got, want)
		}
		for _, r := range one {
			tag := strings.TrimPrefix(r.name, name+":")
			if r.identity["template"] != name || r.identity["tag"] != tag {
				return fmt.Errorf("%s: identity %v", r.name, r.identity)
			}
			if r.resource["template"] != name || r.resource["tag"] != tag || r.resource["build_id"] != buildID || r.resource["id"] != r.name || r.resource["gate"] != nil {
				return fmt.Errorf("%s: resource %v, want the alias on %s", r.name, r.resource, buildID)
			}
		}
		missing := s.list(t, ctx, "e2b_alias", map[string]tftypes.Value{"template": tftypes.NewValue(tftypes.String, name+"-missing")}, false, 0, nil)
		if got := names(missing); !strings.HasPrefix(got, "error: Listing tags: No template has the ID or name") {
			return fmt.Errorf("tags of a template that does not exist: listed %q, want the error", got)
		}
		var ours []listed
		for _, r := range s.list(t, ctx, "e2b_alias", nil, false, 0, nil) {
			if len(r.errors) > 0 || strings.HasPrefix(r.name, name+":") {
				ours = append(ours, r)
			}
		}
		if got := names(ours); got != want {
			return fmt.Errorf("tags of every template: listed %q of %s, want %q", got, name, want)
		}
		return nil
	})
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{{
			Config: templateBuild(srv, name, "b", srv.BaseImage, `  tags = ["v1"]`) + `
resource "e2b_alias" "prod" {
  template = e2b_template.t.name
  tag      = "prod"
  build_id = e2b_template_build.b.build_id
}
`,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("e2b_template_build.b", tfjsonpath.New("build_id"), capture(&buildID)),
				check,
			},
		}},
	})
}
