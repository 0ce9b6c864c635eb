# Sandboxes started from "my-app:prod" run exactly this build.
resource "e2b_alias" "prod" {
  template = e2b_template.app.name
  tag      = "prod"
  build_id = e2b_template_build.app.build_id
}
