package provider

import (
	"os"
	"os/exec"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

// envVars are the provider's environment variables; acceptance tests clear
// them so that a developer's shell does not change their outcome.
var envVars = []string{EnvAPIKey, EnvDomain, EnvAPIURL, EnvSandboxURL}

// protoV6Factories serves p in-process to the Terraform CLI that
// terraform-plugin-testing runs, under the name "e2b".
func protoV6Factories(p provider.Provider) map[string]func() (tfprotov6.ProviderServer, error) {
	return map[string]func() (tfprotov6.ProviderServer, error){
		"e2b": providerserver.NewProtocol6WithError(p),
	}
}

// accPreCheck prepares an acceptance test: it clears the provider's
// environment variables and makes sure terraform-plugin-testing will find a
// Terraform CLI without trying to download one, from TF_ACC_TERRAFORM_PATH
// (set by scripts/test.sh) or PATH; a missing CLI is a missing prerequisite.
func accPreCheck(t *testing.T) {
	t.Helper()
	for _, v := range envVars {
		t.Setenv(v, "")
	}
	if p := os.Getenv("TF_ACC_TERRAFORM_PATH"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("TF_ACC_TERRAFORM_PATH: %v", err)
		}
		return
	}
	if _, err := exec.LookPath("terraform"); err == nil {
		return
	}
	testutil.Missing(t, "no Terraform CLI: set TF_ACC_TERRAFORM_PATH or put terraform on PATH (scripts/test.sh does)")
}
