package provider

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// TestValidatorMessages checks the one style of attribute errors: every validator of
// memory_mb together reports 1 once; a set element's title names the attribute, not
// the element; an error inside an object attribute is placed on the attribute
// Terraform can point at, its title naming the full path.
func TestValidatorMessages(t *testing.T) {
	ctx := context.Background()
	var s resource.SchemaResponse
	NewTemplateBuildResource().Schema(ctx, resource.SchemaRequest{}, &s)
	memoryMB, ok := s.Schema.Attributes["memory_mb"].(schema.Int64Attribute)
	if !ok {
		t.Fatalf("memory_mb is a %T", s.Schema.Attributes["memory_mb"])
	}
	var memory validator.Int64Response
	for _, v := range memoryMB.Validators {
		v.ValidateInt64(ctx, validator.Int64Request{Path: path.Root("memory_mb"), ConfigValue: types.Int64Value(1)}, &memory)
	}
	if errs := memory.Diagnostics.Errors(); len(errs) != 1 || errs[0].Summary() != "Invalid memory_mb" ||
		errs[0].Detail() != "memory_mb is 1; it must be an even number of at least 128." {
		t.Errorf("memory_mb = 1: %v", memory.Diagnostics)
	}

	var tag validator.StringResponse
	tagPath := path.Root("tags").AtSetValue(types.StringValue("release candidate"))
	tagValidator().ValidateString(ctx, validator.StringRequest{Path: tagPath, ConfigValue: types.StringValue("release candidate")}, &tag)
	if errs := tag.Diagnostics.Errors(); len(errs) != 1 || errs[0].Summary() != "Invalid tags" {
		t.Errorf("tag: %v", tag.Diagnostics)
	}

	var timeout validator.StringResponse
	durationValidator(processTimeoutRange).ValidateString(ctx, validator.StringRequest{Path: path.Root("gate").AtName("timeout"), ConfigValue: types.StringValue("0s")}, &timeout)
	errs := timeout.Diagnostics.Errors()
	if len(errs) != 1 || errs[0].Summary() != "Invalid gate.timeout" {
		t.Fatalf("gate.timeout: %v", timeout.Diagnostics)
	}
	if at, ok := errs[0].(interface{ Path() path.Path }); !ok || !at.Path().Equal(path.Root("gate")) {
		t.Errorf("gate.timeout error placed at %v, want gate", errs[0])
	}
}
