package provider

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

// The upgrade tests start from a state an earlier build of the provider wrote
// (testdata/upgrade/, each with the commit that wrote it and the configuration
// it applied) and plan it with this one, on whichever CLI TF_ACC_TERRAFORM_PATH
// names: nothing to change, then what happens outside Terraform. No registry
// serves the old builds, so the objects are made anew on the local server by
// applying the fixture's configuration, and the fixture's state takes the
// place of the one that apply wrote, its server-assigned IDs rewritten to the
// new objects'. Named TestAcc<Resource>_upgrade<Case> (scripts/test.sh runs
// them on every CLI of its matrix).

// fixtureName is the template name in every fixture's configuration and state;
// a test replaces it with a name of its own.
const fixtureName = "upgrade-fixture"

// upgradeFixture is one state of testdata/upgrade/<commit>/<case>.
type upgradeFixture struct {
	config string // main.tf, the fixture's template renamed
	state  []byte // terraform.tfstate, as the old provider wrote it
	name   string // the test's template name
}

func loadUpgradeFixture(t *testing.T, commit, fixtureCase string) upgradeFixture {
	t.Helper()
	dir := filepath.Join("testdata", "upgrade", commit, fixtureCase)
	config, err := os.ReadFile(filepath.Join(dir, "main.tf"))
	acctest.Must(t, err)
	state, err := os.ReadFile(filepath.Join(dir, "terraform.tfstate"))
	acctest.Must(t, err)
	name := uniqueName("acc-upgrade")
	return upgradeFixture{config: strings.ReplaceAll(string(config), fixtureName, name), state: state, name: name}
}

// upgradeWorkspace makes terraform-plugin-testing serve the provider under
// the namespace of its released address, the one the fixtures' states name
// (registry.terraform.io/e2b-terraform/e2b; OpenTofu reads that address as its
// own registry's, as it does in any state Terraform wrote), and keep its
// working directory under a directory of the test's. It returns the path of
// the state file there, which is known once the first step ran.
func upgradeWorkspace(t *testing.T) func() string {
	t.Setenv(tfresource.EnvTfAccProviderNamespace, "e2b-terraform")
	dir := t.TempDir()
	t.Setenv("TF_ACC_TEMP_DIR", dir)
	return func() string {
		t.Helper()
		found, err := filepath.Glob(filepath.Join(dir, "plugintest*", "work*", "terraform.tfstate"))
		acctest.Must(t, err)
		if len(found) != 1 {
			t.Fatalf("want one state file of the test's working directory under %s, found %q", dir, found)
		}
		return found[0]
	}
}

// serverAssigned are the attributes whose values the server chose: the only
// ones rewritten from the fixture's objects to the test's.
var serverAssigned = map[string][]string{
	"e2b_template":       {"id", "created_at"},
	"e2b_template_build": {"build_id"},
}

// stateFile is what the fixtures' states hold and the rewrite needs of them.
type stateFile struct {
	Resources []struct {
		Type      string `json:"type"`
		Name      string `json:"name"`
		Instances []struct {
			Attributes map[string]any `json:"attributes"`
		} `json:"instances"`
	} `json:"resources"`
}

// installFixture writes the fixture's state to statePath in place of the one
// the apply of its configuration wrote there: each server-assigned value of
// the fixture's objects (wherever it appears: IDs, references, import IDs)
// becomes the new object's, and the fixture's template name the test's.
func installFixture(t *testing.T, f upgradeFixture, statePath string) {
	t.Helper()
	written, err := os.ReadFile(statePath)
	acctest.Must(t, err)
	var fixture, current stateFile
	acctest.Must(t, json.Unmarshal(f.state, &fixture))
	acctest.Must(t, json.Unmarshal(written, &current))
	pairs := []string{fixtureName, f.name}
	for _, fr := range fixture.Resources {
		for _, cr := range current.Resources {
			if fr.Type != cr.Type || fr.Name != cr.Name || len(fr.Instances) != 1 || len(cr.Instances) != 1 {
				continue
			}
			for _, attr := range serverAssigned[fr.Type] {
				old, okOld := fr.Instances[0].Attributes[attr].(string)
				now, okNow := cr.Instances[0].Attributes[attr].(string)
				if !okOld || !okNow || old == "" {
					t.Fatalf("%s.%s.%s: %q in the fixture, %q in the new state: cannot map the fixture's object to the new one", fr.Type, fr.Name, attr, old, now)
				}
				pairs = append(pairs, old, now)
			}
		}
	}
	if len(pairs) == 2 {
		t.Fatalf("no resource of the fixture is in the state the apply wrote:\n%s", written)
	}
	acctest.Must(t, os.WriteFile(statePath, []byte(strings.NewReplacer(pairs...).Replace(string(f.state))), 0o600))
}

// testUpgradeDeleted starts from the ready fixture of commit: the fixture's
// configuration applied with this provider (the objects made anew), its state
// installed in place of the one that apply wrote, and a plan of it: nothing to
// change. Then deleteOutside deletes objects outside Terraform (the API
// client, the test's template name): the plan creates those at addresses
// again, and the apply converges.
func testUpgradeDeleted(t *testing.T, commit string, deleteOutside func(*e2bapi.Client, string) error, addresses ...string) {
	srv := localServer(t)
	statePath := upgradeWorkspace(t)
	f := loadUpgradeFixture(t, commit, "ready")
	api := testAPI(t, srv)
	config := srv.ProviderConfig() + f.config
	var afterDelete []plancheck.PlanCheck
	for _, a := range addresses {
		afterDelete = append(afterDelete, plancheck.ExpectResourceAction(a, plancheck.ResourceActionCreate))
	}
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{Config: config},
			{
				PreConfig: func() { installFixture(t, f, statePath()) },
				Config:    config,
				PlanOnly:  true,
			},
			{
				PreConfig: func() { acctest.Must(t, deleteOutside(api, f.name)) },
				Config:    config,
				ConfigPlanChecks: tfresource.ConfigPlanChecks{
					PreApply:             afterDelete,
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
		},
	})
}

// TestAccTemplate_upgradeDeleted plans a template, its build and an alias from
// the release before resource identity, then deletes the template outside
// Terraform: the plan creates all three again.
func TestAccTemplate_upgradeDeleted(t *testing.T) {
	testUpgradeDeleted(t, "61e4dda", func(api *e2bapi.Client, name string) error {
		return api.DeleteTemplate(context.Background(), name)
	}, "e2b_template.t", "e2b_template_build.b", "e2b_alias.prod")
}

// TestAccAlias_upgradeDeleted plans the state of the release before resource
// identity, then deletes the alias's tag outside Terraform: the plan creates
// the alias again.
func TestAccAlias_upgradeDeleted(t *testing.T) {
	testUpgradeDeleted(t, "61e4dda", func(api *e2bapi.Client, name string) error {
		return api.DeleteTags(context.Background(), name, []string{"prod"})
	}, "e2b_alias.prod")
}

// TestAccTemplateBuild_upgradeFailed starts from the state the release before
// resource identity wrote when a build's RUN step failed (the build tainted,
// its status "error"): the configuration with the step fixed converges in one
// apply, and the next plan is empty.
func TestAccTemplateBuild_upgradeFailed(t *testing.T) {
	srv := localServer(t)
	statePath := upgradeWorkspace(t)
	f := loadUpgradeFixture(t, "61e4dda", "failed")
	fixed := strings.Replace(f.config, `"exit 3"`, `"echo fixed"`, 1)
	if fixed == f.config {
		t.Fatal(`the failed fixture's main.tf has no step "exit 3" to fix`)
	}
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				// The failed build made anew, with the state the apply writes on failure.
				Config:      srv.ProviderConfig() + f.config,
				ExpectError: regexp.MustCompile(`(?s)Build failed.*exit 3`),
			},
			{
				PreConfig: func() { installFixture(t, f, statePath()) },
				Config:    srv.ProviderConfig() + fixed,
				ConfigPlanChecks: tfresource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction("e2b_template_build.b", plancheck.ResourceActionCreate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
		},
	})
}
