package provider

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

// TestAccExampleAdopting_identity applies examples/adopting as a user would, with the CLI
// and the provider binary through dev_overrides (terraform-plugin-testing cannot address
// resources made with for_each), configured through the E2B_* environment variables, to
// two templates made outside Terraform: data "e2b_templates" finds them, the import
// blocks adopt them by identity with no other change, and a second plan has nothing to
// do. It needs a CLI that imports by identity (1.12+): it runs in the OpenTofu pass.
func TestAccExampleAdopting_identity(t *testing.T) {
	srv := localServer(t)
	tf := newCLI(t, srv, t.TempDir())
	if version, ok := cliVersion(t, tf.path, 12); !ok {
		t.Skipf("%s is %s; import blocks by identity need 1.12 or later", tf.path, version)
	}
	t.Setenv(EnvAPIURL, srv.APIURL)
	t.Setenv(EnvAPIKey, srv.APIKey)
	api := testAPI(t, srv)
	prefix := uniqueName("acc-adopt") + "-"
	for _, name := range []string{prefix + "web", prefix + "worker"} {
		reg, err := api.CreateTemplateBuild(t.Context(), e2b.TemplateBuildRequestV3{Name: name})
		acctest.Must(t, err)
		// The apply adopts them and the destroy below deletes them; this is for a test
		// that fails before.
		t.Cleanup(func() {
			if err := api.DeleteTemplate(context.Background(), reg.TemplateID); err != nil && !e2bapi.IsNotFound(err) {
				t.Errorf("deleting template %s: %v", reg.TemplateID, err)
			}
		})
	}
	root, err := acctest.ModuleRoot()
	acctest.Must(t, err)
	copyDir(t, filepath.Join(root, "examples", "adopting"), tf.Dir, nil)
	acctest.Must(t, os.WriteFile(filepath.Join(tf.Dir, "terraform.tfvars"), []byte("name_prefix = \""+prefix+"\"\n"), 0o600))

	out := tf.Must("apply", "-auto-approve", "-input=false", "-no-color")
	if !strings.Contains(out, "2 imported, 0 added, 0 changed, 0 destroyed") {
		t.Errorf("apply did not import the two templates and change nothing:\n%s", out)
	}
	state := tf.Must("state", "list")
	for _, name := range []string{"web", "worker"} {
		if !strings.Contains(state, `e2b_template.adopted["`+prefix+name+`"]`) {
			t.Errorf("%s%s not in the state:\n%s", prefix, name, state)
		}
	}
	if out, err := tf.Run("plan", "-detailed-exitcode", "-input=false", "-no-color"); err != nil {
		t.Errorf("second plan is not empty (%v):\n%s", err, out)
	}
	tf.Must("destroy", "-auto-approve", "-input=false", "-no-color")
}
