package provider

import (
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/templatebuild"
)

// TestAddRunErrorChangedSincePlan reports COPY files that changed after the plan, which the
// upload finds as it spools their archives, as the plan's own issue, not as a failed upload.
func TestAddRunErrorChangedSincePlan(t *testing.T) {
	issue := templatebuild.Issue{Summary: "Build context changed since plan",
		Detail: "The files of COPY app /app (step 1) changed after the plan: files hash a at plan, b now. Most recently modified: /ctx/app/x."}
	var diags diag.Diagnostics
	addRunError(&diags, &templatebuild.Error{Stage: templatebuild.StageUpload, Err: &templatebuild.PlanError{Issues: []templatebuild.Issue{issue}}},
		someTemplateID, "")
	if len(diags) != 1 || diags[0].Summary() != issue.Summary || !strings.Contains(diags[0].Detail(), "Most recently modified: /ctx/app/x") {
		t.Errorf("diagnostics %v, want the one issue", diags)
	}
}
