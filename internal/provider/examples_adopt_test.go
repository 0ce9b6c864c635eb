package provider

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/config"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

// TestAccExampleAdopting_identity applies examples/adopting as it is written (the provider
// configured through the E2B_* environment variables) to two templates made outside
// Terraform: data "e2b_templates" finds them and the import blocks adopt them by identity,
// planning no change but the imports.
func TestAccExampleAdopting_identity(t *testing.T) {
	srv := localServer(t)
	t.Setenv(EnvAPIURL, srv.APIURL)
	t.Setenv(EnvAPIKey, srv.APIKey)
	t.Setenv("TF_ACC_PROVIDER_NAMESPACE", "e2b-terraform")
	api := testAPI(t, srv)
	prefix := uniqueName("acc-adopt") + "-"
	ids := map[string]string{}
	for _, name := range []string{prefix + "web", prefix + "worker"} {
		reg, err := api.CreateTemplateBuild(t.Context(), e2bapi.TemplateBuildRequestV3{Name: name})
		acctest.Must(t, err)
		ids[name] = reg.TemplateID
		// The apply adopts them and its destroy deletes them; this is for a test that
		// fails before.
		t.Cleanup(func() {
			if err := api.DeleteTemplate(context.Background(), reg.TemplateID); err != nil && !e2bapi.IsNotFound(err) {
				t.Errorf("deleting template %s: %v", reg.TemplateID, err)
			}
		})
	}
	root, err := acctest.ModuleRoot()
	acctest.Must(t, err)
	var plan []plancheck.PlanCheck
	var state []statecheck.StateCheck
	for name, id := range ids {
		address := fmt.Sprintf("e2b_template.adopted[%q]", name)
		plan = append(plan, plancheck.ExpectResourceAction(address, plancheck.ResourceActionNoop))
		state = append(state, statecheck.ExpectIdentity(address, map[string]knownvalue.Check{"id": knownvalue.StringExact(id)}))
	}
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_12_0)},
		Steps: []tfresource.TestStep{{
			ConfigDirectory:   config.StaticDirectory(filepath.Join(root, "examples", "adopting")),
			ConfigVariables:   config.Variables{"name_prefix": config.StringVariable(prefix)},
			ConfigPlanChecks:  tfresource.ConfigPlanChecks{PreApply: plan},
			ConfigStateChecks: state,
		}},
	})
}
