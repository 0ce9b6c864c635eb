package templatebuild

import (
	"context"
	"slices"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

// templateName is the name builds of tpl are registered and tagged under.
func templateName(tpl *e2b.TemplateWithBuilds) string {
	switch {
	case len(tpl.Names) > 0:
		return tpl.Names[0]
	case len(tpl.Aliases) > 0:
		return tpl.Aliases[0]
	}
	return tpl.TemplateID
}

// Tag gives the ready build buildID those of tags that no build of its template holds
// yet, as Wait does once a build is ready; it fails with an *Error of StageTags.
func (r *Runner) Tag(ctx context.Context, templateID, buildID string, tags []string) error {
	return wrapStage(StageTags, assignMissingTags(ctx, r.api, templateID, buildID, "", tags))
}

// assignMissingTags points those of tags that no build of the template holds yet at the
// ready build buildID: a build started on the template's waiting build got only the
// default tag at registration. Tags another build holds were assigned after this build
// was registered and are left alone. name is the template's name, read when empty.
func assignMissingTags(ctx context.Context, api *e2bapi.Client, templateID, buildID, name string, tags []string) error {
	if len(tags) == 0 {
		return nil
	}
	held, err := api.ListTags(ctx, templateID)
	if err != nil {
		return err
	}
	var missing []string
	for _, tag := range tags {
		if !slices.ContainsFunc(held, func(h e2b.TemplateTag) bool { return h.Tag == tag }) {
			missing = append(missing, tag)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if name == "" {
		tpl, err := api.GetTemplate(ctx, templateID)
		if err != nil {
			return err
		}
		name = templateName(tpl)
	}
	_, err = api.AssignTags(ctx, name+":"+buildID, missing)
	return err
}
