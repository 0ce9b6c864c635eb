# The configuration that wrote terraform.tfstate (see ../../README.md).
resource "e2b_template" "t" {
  name = "upgrade-fixture"
}

resource "e2b_template_build" "b" {
  template_id = e2b_template.t.id
  from_image  = "e2b-test-base:latest"
  steps       = [{ run = { command = "exit 3" } }]
  tags        = ["candidate"]
}

resource "e2b_alias" "prod" {
  template = e2b_template.t.name
  tag      = "prod"
  build_id = e2b_template_build.b.build_id
}
