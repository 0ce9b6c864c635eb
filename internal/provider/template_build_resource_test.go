package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/buildcontext"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
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

func TestResolveSpecSteps(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	acctest.WriteFiles(t, dir, map[string]string{
		"Dockerfile": "FROM busybox\nCOPY --chown=app a.txt /opt/a.txt\nENV A=1\nCMD [\"sleep\", \"1\"]\n",
		"a.txt":      "a",
	})
	m := templateBuildModel{
		Dockerfile: types.StringValue(filepath.Join(dir, "Dockerfile")),
		Steps:      types.ListNull(stepObjectType(t)),
		Force:      types.BoolValue(true),
	}
	spec, known, diags := resolveSpec(ctx, &m)
	if diags.HasError() || !known {
		t.Fatalf("resolveSpec: known=%v %v", known, diags)
	}
	if spec.contextDir != dir {
		t.Errorf("context %q, want the Dockerfile's directory %q", spec.contextDir, dir)
	}
	if spec.start.FromImage != "busybox" || spec.start.StartCmd != "sleep 1" || !spec.start.Force {
		t.Errorf("start request %+v", spec.start)
	}
	if len(spec.copies) != 1 || spec.copies[0].src != "a.txt" || spec.copies[0].dest != "/opt/a.txt" {
		t.Fatalf("copies %+v", spec.copies)
	}
	got := spec.start.Steps[spec.copies[0].step]
	if got.Type != e2bapi.StepCopy || got.Args[2] != "app" {
		t.Errorf("COPY step %+v, want user app", got)
	}
	hashes, listings, diags := hashCopies(ctx, spec, hashModePortable)
	if diags.HasError() || len(hashes) != 1 || len(listings[0].Entries) != 1 {
		t.Fatalf("hashCopies: %v %v", hashes, diags)
	}
	sdk, _, diags := hashCopies(ctx, spec, hashModeSDK)
	if diags.HasError() || sdk[0] == hashes[0] {
		t.Errorf("SDK hash %v should differ from the portable %v (%v)", sdk, hashes, diags)
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

func TestReadDockerfile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "Dockerfile")
	acctest.Must(t, os.WriteFile(p, []byte("FROM x\n"), 0o644))
	if content, d, err := readDockerfile(p); err != nil || content != "FROM x\n" || d != dir {
		t.Errorf("path: %q %q %v", content, d, err)
	}
	if content, d, err := readDockerfile("FROM y\nRUN true\n"); err != nil || !strings.HasPrefix(content, "FROM y") || d != "" {
		t.Errorf("content: %q %q %v", content, d, err)
	}
	if _, _, err := readDockerfile(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "neither a readable file") {
		t.Errorf("missing file: %v", err)
	}
}

func TestCheckCopySrc(t *testing.T) {
	for src, ok := range map[string]bool{"a": true, "a/../b": true, "**/*.go": true, ".": true,
		"..": false, "../a": false, "a/../../b": false, "/etc": false} {
		if err := checkCopySrc(src); (err == nil) != ok {
			t.Errorf("checkCopySrc(%q) = %v, want ok=%v", src, err, ok)
		}
	}
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

func TestNewestEntries(t *testing.T) {
	dir := t.TempDir()
	acctest.WriteFiles(t, dir, map[string]string{"old.txt": "o", "mid.txt": "m", "new.txt": "n", "sub/": ""})
	base := time.Now().Add(-time.Hour)
	for i, name := range []string{"old.txt", "mid.txt", "new.txt"} {
		when := base.Add(time.Duration(i) * time.Minute)
		acctest.Must(t, os.Chtimes(filepath.Join(dir, name), when, when))
	}
	l, err := buildcontext.List(dir, ".", buildcontext.ListOptions{})
	acctest.Must(t, err)
	got := newestEntries(l, 2)
	want := filepath.Join(l.Context, "new.txt") + ", " + filepath.Join(l.Context, "mid.txt")
	if got != want {
		t.Errorf("newestEntries = %q, want %q", got, want)
	}
}

func TestIsBuildGone(t *testing.T) {
	for _, c := range []struct {
		err  error
		gone bool
	}{
		{nil, false},
		{&e2bapi.APIError{StatusCode: 404}, true},
		{&e2bapi.APIError{StatusCode: 400, Message: "Build 'x' not found"}, true},
		{&e2bapi.APIError{StatusCode: 400, Message: "invalid query"}, false},
		{&e2bapi.APIError{StatusCode: 500, Message: "not found"}, false},
	} {
		if got := isBuildGone(c.err); got != c.gone {
			t.Errorf("isBuildGone(%v) = %v, want %v", c.err, got, c.gone)
		}
	}
}
