package provider

import (
	"context"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/hashicorp/terraform-plugin-testing/echoprovider"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/templatebuild"
)

// TestProcessSchemasMatchModel checks that the data source and the
// ephemeral resource, which share processModel and runProcess, have valid
// schemas with the same attributes (each turns processAttributes into its
// package's types, and the two must agree also in flags, documentation and
// validators), and that a filled model can be stored in both: the ephemeral
// twin cannot be run by the Terraform 1.8 of the acceptance tests.
func TestProcessSchemasMatchModel(t *testing.T) {
	ctx := context.Background()

	var ds datasource.SchemaResponse
	NewProcessDataSource().Schema(ctx, datasource.SchemaRequest{}, &ds)
	var eph ephemeral.SchemaResponse
	NewProcessEphemeralResource().Schema(ctx, ephemeral.SchemaRequest{}, &eph)
	if d := ds.Schema.ValidateImplementation(ctx); d.HasError() {
		t.Fatal(d)
	}
	if d := eph.Schema.ValidateImplementation(ctx); d.HasError() {
		t.Fatal(d)
	}
	if !ds.Schema.Type().Equal(eph.Schema.Type()) {
		t.Fatalf("schemas differ:\ndata source %s\nephemeral   %s", ds.Schema.Type(), eph.Schema.Type())
	}
	// Turned into two packages' types, the attributes must also agree in what the type
	// does not show: optional or computed, documentation and validation.
	for name, d := range ds.Schema.Attributes {
		e := eph.Schema.Attributes[name]
		if d.IsOptional() != e.IsOptional() || d.IsComputed() != e.IsComputed() || d.IsRequired() != e.IsRequired() ||
			d.IsSensitive() != e.IsSensitive() || d.GetMarkdownDescription() != e.GetMarkdownDescription() {
			t.Errorf("attribute %s differs:\ndata source %+v\nephemeral   %+v", name, d, e)
		}
		dv, ev := validatorDescriptions(ctx, d), validatorDescriptions(ctx, e)
		if !slices.Equal(dv, ev) {
			t.Errorf("attribute %s is validated differently: data source %q, ephemeral %q", name, dv, ev)
		}
	}

	m := processModel{
		processArgumentsModel: processArgumentsModel{
			commandModel: commandModel{
				Command: types.StringValue("echo"), Cmd: types.StringNull(), Args: types.ListNull(types.StringType),
				Env: types.MapNull(types.StringType), Cwd: types.StringNull(), User: types.StringNull(), Timeout: types.StringNull(),
			},
			Template: types.StringValue("name:tag"), Stdin: types.StringNull(), MaxOutputBytes: types.Int64Null(),
			AllowNonZeroExit: types.BoolNull(),
		},
		SandboxID: types.StringValue("isb"), ExitCode: types.Int64Value(3), Stdout: types.StringValue("out"),
		Stderr: types.StringValue(""), StdoutTruncated: types.BoolValue(false), StderrTruncated: types.BoolValue(true),
	}
	result := tfsdk.EphemeralResultData{Schema: eph.Schema, Raw: tftypes.NewValue(eph.Schema.Type().TerraformType(ctx), nil)}
	if d := result.Set(ctx, &m); d.HasError() {
		t.Fatalf("ephemeral result: %v", d)
	}
	var back processModel
	if d := result.Get(ctx, &back); d.HasError() || back.ExitCode.ValueInt64() != 3 || !back.StderrTruncated.ValueBool() {
		t.Fatalf("ephemeral result read back %+v: %v", back, d)
	}
	state := tfsdk.State{Schema: ds.Schema, Raw: tftypes.NewValue(ds.Schema.Type().TerraformType(ctx), nil)}
	if d := state.Set(ctx, &m); d.HasError() {
		t.Fatalf("data source state: %v", d)
	}
}

// validatorDescriptions describes the string and int64 validators of an attribute.
func validatorDescriptions(ctx context.Context, a any) []string {
	var out []string
	if v, ok := a.(interface{ StringValidators() []validator.String }); ok {
		for _, x := range v.StringValidators() {
			out = append(out, x.Description(ctx))
		}
	}
	if v, ok := a.(interface{ Int64Validators() []validator.Int64 }); ok {
		for _, x := range v.Int64Validators() {
			out = append(out, x.Description(ctx))
		}
	}
	return out
}

// TestAccProcessEphemeralResource_overProtocol opens the ephemeral resource the way Terraform 1.10+
// does, through the provider's protocol 6 server (schema, provider configuration,
// validation, open), against the local server: the Terraform 1.8 CLI of the acceptance
// tests cannot, and no newer CLI can be built here (TestAccProcessEphemeralResource_echo).
func TestAccProcessEphemeralResource_overProtocol(t *testing.T) {
	srv := localServer(t)
	ctx := t.Context()
	template := processTemplateByAPI(t, srv)

	server, err := providerserver.NewProtocol6WithError(New("test")())()
	acctest.Must(t, err)
	schemas, err := server.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	acctest.Must(t, err)
	if _, ok := schemas.EphemeralResourceSchemas["e2b_process"]; !ok || len(schemas.Diagnostics) != 0 {
		t.Fatalf("provider schema: no ephemeral e2b_process (diagnostics %v)", schemas.Diagnostics)
	}

	var providerSchema provider.SchemaResponse
	New("test")().Schema(ctx, provider.SchemaRequest{}, &providerSchema)
	configured, err := server.ConfigureProvider(ctx, &tfprotov6.ConfigureProviderRequest{
		TerraformVersion: "1.10.0",
		Config: dynamicValue(t, providerSchema.Schema.Type().TerraformType(ctx), map[string]tftypes.Value{
			"api_url":     tftypes.NewValue(tftypes.String, srv.APIURL),
			"api_key":     tftypes.NewValue(tftypes.String, srv.APIKey),
			"sandbox_url": tftypes.NewValue(tftypes.String, srv.SandboxURL),
		}),
	})
	acctest.Must(t, err)
	if len(configured.Diagnostics) != 0 {
		t.Fatalf("configuring the provider: %v", configured.Diagnostics)
	}

	var ephSchema ephemeral.SchemaResponse
	NewProcessEphemeralResource().Schema(ctx, ephemeral.SchemaRequest{}, &ephSchema)
	ephType := ephSchema.Schema.Type().TerraformType(ctx)
	config := dynamicValue(t, ephType, map[string]tftypes.Value{
		"template":            tftypes.NewValue(tftypes.String, template),
		"command":             tftypes.NewValue(tftypes.String, "echo secret-output; echo to-stderr >&2; exit 3"),
		"allow_non_zero_exit": tftypes.NewValue(tftypes.Bool, true),
	})
	validated, err := server.ValidateEphemeralResourceConfig(ctx, &tfprotov6.ValidateEphemeralResourceConfigRequest{TypeName: "e2b_process", Config: config})
	acctest.Must(t, err)
	if len(validated.Diagnostics) != 0 {
		t.Fatalf("validating: %v", validated.Diagnostics)
	}
	opened, err := server.OpenEphemeralResource(ctx, &tfprotov6.OpenEphemeralResourceRequest{TypeName: "e2b_process", Config: config})
	acctest.Must(t, err)
	if len(opened.Diagnostics) != 0 {
		t.Fatalf("opening: %v", opened.Diagnostics)
	}
	raw, err := opened.Result.Unmarshal(ephType)
	acctest.Must(t, err)
	result := tfsdk.EphemeralResultData{Schema: ephSchema.Schema, Raw: raw}
	var got processModel
	if d := result.Get(ctx, &got); d.HasError() {
		t.Fatal(d)
	}
	if got.ExitCode.ValueInt64() != 3 || got.Stdout.ValueString() != "secret-output\n" || got.Stderr.ValueString() != "to-stderr\n" || got.SandboxID.ValueString() == "" {
		t.Errorf("result: exit %s, stdout %s, stderr %s, sandbox %s", got.ExitCode, got.Stdout, got.Stderr, got.SandboxID)
	}
	if ids, err := runningSandboxes(ctx, srv); err != nil || len(ids) != 0 {
		t.Errorf("sandboxes %q still run (%v): the ephemeral resource must kill the sandbox it starts", ids, err)
	}
}

// dynamicValue is an object of type typ with the given attributes, the others null.
func dynamicValue(t *testing.T, typ tftypes.Type, attrs map[string]tftypes.Value) *tfprotov6.DynamicValue {
	t.Helper()
	obj, ok := typ.(tftypes.Object)
	if !ok {
		t.Fatalf("%s is not an object type", typ)
	}
	values := map[string]tftypes.Value{}
	for name, attrType := range obj.AttributeTypes {
		values[name] = tftypes.NewValue(attrType, nil)
	}
	for name, v := range attrs {
		if _, ok := obj.AttributeTypes[name]; !ok {
			t.Fatalf("%s has no attribute %s", typ, name)
		}
		values[name] = v
	}
	dv, err := tfprotov6.NewDynamicValue(typ, tftypes.NewValue(typ, values))
	acctest.Must(t, err)
	return &dv
}

// processTemplateByAPI builds, without Terraform, the template processTemplate makes,
// and returns its name:buildID.
func processTemplateByAPI(t *testing.T, srv *acctest.Server) string {
	t.Helper()
	api := testAPI(t, srv)
	name := uniqueName("acc-eph-proto")
	reg, err := api.CreateTemplateBuild(t.Context(), e2b.TemplateBuildRequestV3{Name: name})
	acctest.Must(t, err)
	t.Cleanup(func() {
		if err := api.DeleteTemplate(context.Background(), reg.TemplateID); err != nil {
			t.Errorf("deleting template %s: %v", reg.TemplateID, err)
		}
	})
	b, err := templatebuild.Plan(t.Context(), templatebuild.Spec{TemplateID: reg.TemplateID, FromImage: srv.DebianImage,
		Steps: []templatebuild.Step{{Step: steps.NewWorkdir("/")}}}, tflogLogger{})
	acctest.Must(t, err)
	res, err := templatebuild.NewRunner(api).Run(t.Context(), b, templatebuild.Options{})
	if err != nil || res.Status != e2b.BuildReady {
		t.Fatalf("building the template: %+v, %v", res, err)
	}
	buildID := res.BuildID
	return name + ":" + buildID
}

// TestAccProcessEphemeralResource_echo runs the ephemeral twin and hands its output to
// the echo provider, the one place an ephemeral value can be observed.
func TestAccProcessEphemeralResource_echo(t *testing.T) {
	srv := localServer(t)
	base := processTemplate(srv, uniqueName("acc-eph"))
	withEcho := factories()
	withEcho["echo"] = func() (tfprotov6.ProviderServer, error) { return echoprovider.NewProviderServer()() }
	tfresource.Test(t, tfresource.TestCase{
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_10_0)},
		ProtoV6ProviderFactories: withEcho,
		Steps: []tfresource.TestStep{{
			Config: base + `
ephemeral "e2b_process" "p" {
  template = local.run_from
  command  = "echo secret-output"
}

provider "echo" {
  data = ephemeral.e2b_process.p.stdout
}

resource "echo" "out" {}
`,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("echo.out", tfjsonpath.New("data"), knownvalue.StringExact("secret-output\n")),
				noSandboxLeft(srv),
			},
		}},
	})
}
