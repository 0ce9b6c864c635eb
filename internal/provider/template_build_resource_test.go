package provider

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
)

// planProvider configures the provider for plan-only tests: planning a
// create calls no API, so the address never has to answer.
const planProvider = `
provider "e2b" {
  api_url = "http://127.0.0.1:9"
  api_key = "e2b_0123456789abcdef"
}
`

const someTemplateID = "abcdefghij0123456789"

// planOnly runs configs as plan-only steps that must fail with errs.
func planOnlyErrors(t *testing.T, cases map[string]struct {
	config string
	err    string
}) {
	t.Helper()
	accPreCheck(t)
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			tfresource.UnitTest(t, tfresource.TestCase{
				ProtoV6ProviderFactories: protoV6Factories(New("test")()),
				Steps: []tfresource.TestStep{{
					Config:      planProvider + c.config,
					PlanOnly:    true,
					ExpectError: regexp.MustCompile(c.err),
				}},
			})
		})
	}
}

func TestTemplateBuildPlanErrors(t *testing.T) {
	ctxDir := t.TempDir()
	acctest.WriteFiles(t, ctxDir, map[string]string{"a.txt": "a"})
	dockerDir := t.TempDir()
	acctest.WriteFiles(t, dockerDir, map[string]string{"Dockerfile": "FROM a AS one\nRUN true\nFROM b\n"})

	build := func(body string) string {
		return fmt.Sprintf(`
resource "e2b_template_build" "b" {
  template_id = %q
%s
}
`, someTemplateID, body)
	}
	planOnlyErrors(t, map[string]struct {
		config string
		err    string
	}{
		"escaping COPY source": {build(fmt.Sprintf(`
  from_image = "busybox"
  context    = %q
  steps = [{ copy = { src = "../etc/passwd", dest = "/x" } }]
`, ctxDir)), `(?s)COPY source "../etc/passwd".*escapes the context`},
		"absolute COPY source": {build(fmt.Sprintf(`
  from_image = "busybox"
  context    = %q
  steps = [{ copy = { src = "/etc/passwd", dest = "/x" } }]
`, ctxDir)), `(?s)COPY source "/etc/passwd".*absolute`},
		"missing context": {build(`
  from_image = "busybox"
  context    = "/nonexistent/e2b-context"
  steps = [{ copy = { src = "a.txt", dest = "/x" } }]
`), `(?s)Missing build context.*/nonexistent/e2b-context`},
		"COPY source matching nothing": {build(fmt.Sprintf(`
  from_image = "busybox"
  context    = %q
  steps = [{ copy = { src = "nothing-*.txt", dest = "/x" } }]
`, ctxDir)), `(?s)step 1.*nothing-\*\.txt`},
		"both from_image and from_template": {build(`
  from_image    = "busybox"
  from_template = "base"
`), `(?s)Invalid Attribute Combination.*from_image.*from_template`},
		"no base": {build(`
  steps = [{ run = { command = "true" } }]
`), `(?s)Missing Attribute Configuration.*from_image,from_template,dockerfile`},
		"step with two kinds": {build(`
  from_image = "busybox"
  steps = [{ run = { command = "true" }, workdir = "/x" }]
`), `(?s)Step 1 must set exactly one of run, copy, env, workdir and user; it sets run\s+and workdir`},
		"empty step": {build(`
  from_image = "busybox"
  steps = [{}]
`), `(?s)Step 1 must set exactly one of run, copy, env, workdir and user; it sets\s+none`},
		"odd cpu_count": {build(`
  from_image = "busybox"
  cpu_count  = 3
`), `(?s)cpu_count is 3; it must be 1 or an even number up to 32`},
		"small memory": {build(`
  from_image = "busybox"
  memory_mb  = 64
`), `(?s)memory_mb.*at least 128`},
		"bad mode": {build(fmt.Sprintf(`
  from_image = "busybox"
  context    = %q
  steps = [{ copy = { src = "a.txt", dest = "/x", mode = "rwx" } }]
`, ctxDir)), `(?s)must be octal permissions`},
		"bad tag": {build(`
  from_image = "busybox"
  tags       = ["Not A Tag"]
`), `(?s)invalid.*tag`},
		"multi-stage dockerfile": {build(fmt.Sprintf(`
  dockerfile = %q
`, filepath.Join(dockerDir, "Dockerfile"))), `(?s)Invalid dockerfile.*line 3`},
		"bad template_id": {`
resource "e2b_template_build" "b" {
  template_id = "Not-An-ID"
  from_image  = "busybox"
}
`, `(?s)template_id`},
		"bad template name": {`
resource "e2b_template" "t" {
  name = "Bad Name!"
}
`, `(?s)Invalid name.*invalid alias`},
		"template name with a tag": {`
resource "e2b_template" "t" {
  name = "good:v1"
}
`, `(?s)must not carry a tag`},
		"alias on the default tag": {`
resource "e2b_alias" "a" {
  template = "good"
  tag      = "default"
  build_id = "1f0c6f2e-8f5b-4b8e-9a8e-1c2d3e4f5a6b"
}
`, `(?s)tag "default" cannot be managed`},
		"alias with a bad build_id": {`
resource "e2b_alias" "a" {
  template = "good"
  tag      = "prod"
  build_id = "latest"
}
`, `(?s)build_id`},
		"process with template and sandbox_id": {`
data "e2b_process" "p" {
  template   = "good"
  sandbox_id = "iabc"
  command    = "true"
}
`, `(?s)Invalid Attribute Combination`},
		"process without command": {`
data "e2b_process" "p" {
  template = "good"
}
`, `(?s)Missing Attribute Configuration.*command,cmd`},
		"process with a bad timeout": {`
data "e2b_process" "p" {
  template = "good"
  command  = "true"
  timeout  = "soon"
}
`, `(?s)not a duration`},
	})
}

// TestTemplateBuildPlanHashes plans builds without a server: the hashes are
// known at plan for a known context and unknown for one that is not known
// yet, and nothing fails.
func TestTemplateBuildPlanHashes(t *testing.T) {
	accPreCheck(t)
	ctxDir := t.TempDir()
	acctest.WriteFiles(t, ctxDir, map[string]string{"a.txt": "a", "d/b.txt": "b"})
	steps := `
  steps = [
    { copy = { src = "a.txt", dest = "/a.txt" } },
    { run = { command = "true" } },
    { copy = { src = "d", dest = "/d" } },
  ]
`
	tfresource.UnitTest(t, tfresource.TestCase{
		ProtoV6ProviderFactories: protoV6Factories(New("test")()),
		Steps: []tfresource.TestStep{
			{
				Config: planProvider + fmt.Sprintf(`
resource "e2b_template_build" "b" {
  template_id = %q
  from_image  = "busybox"
  context     = %q
%s
}
`, someTemplateID, ctxDir, steps),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("e2b_template_build.b", plancheck.ResourceActionCreate),
					plancheck.ExpectKnownValue("e2b_template_build.b", tfjsonpath.New("copy_hashes"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f]{64}$`)),
						knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f]{64}$`)),
					})),
				}},
			},
			{
				Config: planProvider + fmt.Sprintf(`
resource "terraform_data" "later" {
  input = %q
}

resource "e2b_template_build" "b" {
  template_id = %q
  from_image  = "busybox"
  context     = terraform_data.later.output
%s
}
`, ctxDir, someTemplateID, steps),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
					plancheck.ExpectUnknownValue("e2b_template_build.b", tfjsonpath.New("copy_hashes")),
				}},
			},
		},
	})
}

// TestBuildSpec converts a configured Dockerfile and steps into the build templatebuild
// plans: the Dockerfile's context and commands, each step kind in the wire layout.
func TestBuildSpec(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	acctest.WriteFiles(t, dir, map[string]string{
		"Dockerfile": "FROM busybox\nCOPY --chown=app a.txt /opt/a.txt\nENV A=1\nCMD [\"sleep\", \"1\"]\n",
		"a.txt":      "a",
	})
	stepType := stepObjectType(t)
	stepsValue, d := types.ListValueFrom(ctx, stepType, []stepModel{
		{Run: &runStepModel{Command: types.StringValue("make"), User: types.StringValue("root")}, Env: types.MapNull(types.StringType)},
		{Copy: &copyStepModel{Src: types.StringValue("a.txt"), Dest: types.StringValue("/a"), User: types.StringNull(),
			Mode: types.StringValue("755"), ResolveSymlinks: types.BoolValue(true)}, Env: types.MapNull(types.StringType)},
		{Env: types.MapValueMust(types.StringType, map[string]attr.Value{"B": types.StringValue("2"), "A": types.StringValue("1")})},
	})
	if d.HasError() {
		t.Fatal(d)
	}
	m := templateBuildModel{
		TemplateID: types.StringValue(someTemplateID),
		Dockerfile: types.StringValue(filepath.Join(dir, "Dockerfile")),
		Steps:      stepsValue,
		Force:      types.BoolValue(true),
		Tags:       types.SetNull(types.StringType),
		CPUCount:   types.Int64Value(2),
	}
	spec, known, diags := buildSpec(ctx, &m)
	if diags.HasError() || !known {
		t.Fatalf("buildSpec: known=%v %v", known, diags)
	}
	want := []steps.Step{
		{Type: steps.Run, Args: []string{"make", "root"}},
		{Type: steps.Copy, Args: []string{"a.txt", "/a", "", "0755"}},
		{Type: steps.Env, Args: []string{"A", "1", "B", "2"}},
	}
	for i, s := range spec.Steps {
		if !slices.Equal(s.Args, want[i].Args) || s.Type != want[i].Type || s.ResolveSymlinks != (i == 1) {
			t.Errorf("step %d = %+v, want %+v", i+1, s, want[i])
		}
	}
	if spec.Dockerfile != filepath.Join(dir, "Dockerfile") || !spec.Force || *spec.CPUCount != 2 || spec.MemoryMB != nil {
		t.Errorf("spec %+v", spec)
	}
	var planDiags diag.Diagnostics
	b := planBuild(ctx, &m, &planDiags)
	if planDiags.HasError() || b == nil || b.ContextDir != dir || len(b.Copies) != 2 || b.Start.StartCmd != "sleep 1" {
		t.Fatalf("planBuild: %+v %v", b, planDiags)
	}
}

// stepObjectType is the element type of steps, from the schema.
func stepObjectType(t *testing.T) types.ObjectType {
	t.Helper()
	r := NewTemplateBuildResource()
	var resp = schemaOf(t, r)
	list, ok := resp.Attributes["steps"].GetType().(types.ListType)
	if !ok {
		t.Fatalf("steps is a %T", resp.Attributes["steps"].GetType())
	}
	obj, ok := list.ElemType.(types.ObjectType)
	if !ok {
		t.Fatalf("steps holds %T", list.ElemType)
	}
	return obj
}

func schemaOf(t *testing.T, r resource.Resource) schema.Schema {
	t.Helper()
	var resp resource.SchemaResponse
	r.Schema(context.Background(), resource.SchemaRequest{}, &resp)
	if resp.Diagnostics.HasError() {
		t.Fatal(resp.Diagnostics)
	}
	if diags := resp.Schema.ValidateImplementation(context.Background()); diags.HasError() {
		t.Fatal(diags)
	}
	return resp.Schema
}
