package provider

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// TestProcessSchemasMatchModel checks that the data source and the
// ephemeral resource, which share processModel and runProcess, have valid
// schemas with the same attributes, and that a filled model can be stored
// in both: the ephemeral twin cannot be run by the Terraform 1.8 of the
// acceptance tests.
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

	m := processModel{
		Template: types.StringValue("name:tag"), SandboxID: types.StringValue("isb"),
		Command: types.StringValue("echo"), Cmd: types.StringNull(), Args: types.ListNull(types.StringType),
		Env: types.MapNull(types.StringType), Cwd: types.StringNull(), User: types.StringNull(),
		Stdin: types.StringNull(), Timeout: types.StringNull(), MaxOutputBytes: types.Int64Null(),
		AllowNonZeroExit: types.BoolNull(), ExitCode: types.Int64Value(3), Stdout: types.StringValue("out"),
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
