package provider

import (
	"sync"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

func TestDefaultTagPlansWarnWhicheverPlansSecond(t *testing.T) {
	noTags := types.SetNull(types.StringType)
	tagged := types.SetValueMust(types.StringType, []attr.Value{types.StringValue("candidate")})
	id, name := types.StringValue(someTemplateID), types.StringValue("app")
	def := types.StringValue("default")

	// Build first: the alias, by name once the template paired it with its ID, warns.
	d := &ProviderData{defaultTag: newDefaultTagPlans()}
	d.recordTemplatePlan(name, id)
	if diags := d.recordBuildPlan(id, noTags); diags.WarningsCount() != 0 {
		t.Errorf("a build alone warned: %v", diags)
	}
	if diags := d.recordAliasPlan(name, def); diags.WarningsCount() != 1 {
		t.Errorf("alias after a build without tags: %v, want one warning", diags)
	}

	// Alias first, by ID: the build warns; a tagged one does not.
	d = &ProviderData{defaultTag: newDefaultTagPlans()}
	if diags := d.recordAliasPlan(id, def); diags.WarningsCount() != 0 {
		t.Errorf("an alias alone warned: %v", diags)
	}
	if diags := d.recordBuildPlan(id, tagged); diags.WarningsCount() != 0 {
		t.Errorf("a tagged build warned: %v", diags)
	}
	if diags := d.recordBuildPlan(id, types.SetValueMust(types.StringType, nil)); diags.WarningsCount() != 1 {
		t.Errorf("build with empty tags after the alias: %v, want one warning", diags)
	}

	// Another tag, another template, or values not known yet: nothing.
	d = &ProviderData{defaultTag: newDefaultTagPlans()}
	d.recordBuildPlan(id, noTags)
	d.recordBuildPlan(types.StringUnknown(), noTags)
	for _, c := range []struct{ template, tag types.String }{
		{id, types.StringValue("prod")}, {types.StringValue("other"), def}, {types.StringUnknown(), def}, {name, def},
	} {
		if diags := d.recordAliasPlan(c.template, c.tag); diags.WarningsCount() != 0 {
			t.Errorf("alias %s:%s warned: %v", c.template, c.tag, diags)
		}
	}
	// No provider data (its configuration unknown during plan): nothing, and no panic.
	var none *ProviderData
	none.recordTemplatePlan(name, id)
	if diags := none.recordAliasPlan(id, def); diags.WarningsCount() != 0 {
		t.Error(diags)
	}
}

// Terraform plans independent resources in parallel: exactly one of the two warns.
func TestDefaultTagPlansConcurrent(t *testing.T) {
	for range 50 {
		d := &ProviderData{defaultTag: newDefaultTagPlans()}
		id := types.StringValue(someTemplateID)
		var wg sync.WaitGroup
		var build, alias int
		wg.Go(func() { build = d.recordBuildPlan(id, types.SetNull(types.StringType)).WarningsCount() })
		wg.Go(func() { alias = d.recordAliasPlan(id, types.StringValue("default")).WarningsCount() })
		wg.Wait()
		if build+alias != 1 {
			t.Fatalf("%d warnings from the build, %d from the alias; want one in all", build, alias)
		}
	}
}
