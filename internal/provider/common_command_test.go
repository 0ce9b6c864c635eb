package provider

import (
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

func TestCommandRunRequest(t *testing.T) {
	ctx := t.Context()
	m := commandModel{
		Command: types.StringNull(), Cmd: types.StringValue("/app/smoke.sh"),
		Args: types.ListValueMust(types.StringType, []attr.Value{types.StringValue("-v")}),
		Env:  types.MapValueMust(types.StringType, map[string]attr.Value{"A": types.StringValue("b")}),
		Cwd:  types.StringValue("/app"), User: types.StringNull(), Timeout: types.StringValue("2m"),
	}
	req, diags := m.runRequest(ctx, path.Root("gate"))
	if diags.HasError() || req.Cmd != "/app/smoke.sh" || len(req.Args) != 1 || req.Env["A"] != "b" || req.Cwd != "/app" || req.Timeout != 2*time.Minute {
		t.Errorf("runRequest = %+v, %v", req, diags)
	}

	// During validation, values from other resources or module variables are unknown.
	m.Env = types.MapValueMust(types.StringType, map[string]attr.Value{"A": types.StringUnknown()})
	m.Args = types.ListUnknown(types.StringType)
	m.Timeout = types.StringUnknown()
	if _, diags := m.runRequest(ctx, path.Root("gate")); diags.HasError() {
		t.Errorf("unknown values: %v", diags)
	}

	m.Cmd, m.Command = types.StringNull(), types.StringValue("echo")
	m.Args = types.ListValueMust(types.StringType, []attr.Value{types.StringValue("a")})
	m.Timeout = types.StringValue("0s")
	_, diags = m.runRequest(ctx, path.Root("gate"))
	if diags.ErrorsCount() != 2 || diags.Errors()[0].Summary() != "Invalid gate.timeout" || diags.Errors()[1].Summary() != "Invalid gate.args" {
		t.Errorf("args without cmd and a zero timeout: %v", diags)
	}
}
