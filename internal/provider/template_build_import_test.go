package provider

import (
	"fmt"
	"strconv"
	"testing"

	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

// importBuild is an import block of the build buildID of templateID into
// e2b_template_build.b.
func importBuild(templateID string, buildID *string) func() string {
	return func() string {
		return fmt.Sprintf(`
import {
  to = e2b_template_build.b
  id = "%s/%s"
}
`, templateID, *buildID)
	}
}

// reuseSetup is the shared local server, a client of it, a template registered outside
// Terraform (named from prefix) and the context of reuseBuild.
func reuseSetup(t *testing.T, prefix string) (*acctest.Server, *e2bapi.Client, string, string) {
	t.Helper()
	srv := localServer(t)
	api := testAPI(t, srv)
	ctxDir := t.TempDir()
	acctest.WriteFiles(t, ctxDir, map[string]string{"app/a.txt": "one\n"})
	return srv, api, builtTemplate(t, api, uniqueName(prefix)), ctxDir
}

// TestAccTemplateBuild_importReused imports a build made with reuse into a fresh state:
// with the configuration it was made from, the plan adopts it (an update in place that
// builds nothing) and the apply gives it the configuration's tags; with another
// configuration the plan replaces it and says why.
func TestAccTemplateBuild_importReused(t *testing.T) {
	srv, api, templateID, ctxDir := reuseSetup(t, "acc-import-reused")
	res := "e2b_template_build.b"
	var buildID, specHash string
	tag := func(s string) func() string { return func() string { return s } }
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{{
			Config: reuseBuild(srv, strconv.Quote(templateID), ctxDir, `"first"`),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(res, tfjsonpath.New("build_id"), capture(&buildID)),
				statecheck.ExpectKnownValue(res, tfjsonpath.New("spec_hash"), capture(&specHash)),
				buildCount(api, templateID, 1), // the reuse build ran on the build registered with the template
			},
		}},
	})
	// That state is gone (destroy forgets the build); the build stays, as one made by
	// another workspace, the SDK or the CLI would.
	warnings := &planWarnings{}
	adopted := importBuild(templateID, &buildID)
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: warnings.factories(),
		Steps: []tfresource.TestStep{
			{
				PreConfig:          warnings.reset,
				Config:             reuseBuild(srv, strconv.Quote(templateID), ctxDir, `"first", "second"`) + adopted(),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(res, tfjsonpath.New("build_id"), equalTo("the imported build", &buildID)),
					plancheck.ExpectKnownValue(res, tfjsonpath.New("spec_hash"), equalTo("the imported build's spec hash", &specHash)),
					warnings.only("e2b_template_build", "Adopting an imported build"),
				}},
			},
			{
				Config: reuseBuild(srv, strconv.Quote(templateID), ctxDir, `"first", "second"`) + adopted(),
				ConfigPlanChecks: tfresource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("build_id"), equalTo("the imported build", &buildID)),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("copy_hashes"), knownvalue.ListSizeExact(1)),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("reuse"), knownvalue.Bool(true)),
					buildCount(api, templateID, 1), // nothing built
					tagsAt(api, templateID, &buildID, tag("first"), tag("second"), func() string { return "spec-" + specHash[:16] }),
				},
			},
		},
	})
	// Another configuration (a changed COPY file) is another build: the import replaces.
	acctest.WriteFiles(t, ctxDir, map[string]string{"app/a.txt": "two\n"})
	warnings.reset()
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: warnings.factories(),
		Steps: []tfresource.TestStep{{
			Config:             reuseBuild(srv, strconv.Quote(templateID), ctxDir, `"first"`) + adopted(),
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
			ConfigPlanChecks: tfresource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(res, plancheck.ResourceActionReplace),
				warnings.only("e2b_template_build", "Imported build will be built again"),
			}},
		}},
	})
}

// TestAccTemplateBuild_identity sets the build's identity at create and imports a build
// made with reuse by identity: the plan adopts it.
func TestAccTemplateBuild_identity(t *testing.T) {
	srv, _, templateID, ctxDir := reuseSetup(t, "acc-build-identity")
	res := "e2b_template_build.b"
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_12_0)},
		Steps: []tfresource.TestStep{
			{
				Config: reuseBuild(srv, strconv.Quote(templateID), ctxDir, `"v1"`),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectIdentity(res, map[string]knownvalue.Check{
						"template_id": knownvalue.StringExact(templateID),
						"build_id":    knownvalue.NotNull(),
					}),
					statecheck.ExpectIdentityValueMatchesState(res, tfjsonpath.New("build_id")),
				},
			},
			{
				ResourceName:       res,
				ImportState:        true,
				ImportStateKind:    tfresource.ImportBlockWithResourceIdentity,
				ExpectNonEmptyPlan: true,
				ImportPlanChecks: tfresource.ImportPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
				}},
			},
		},
	})
}
