# The build another team's "base:prod" tag points at now.
data "e2b_alias" "base" {
  template = "base"
  tag      = "prod"
}

resource "e2b_template" "app" {
  name = "on-base"
}

# Built on exactly that build: when the base team moves "prod", the plan shows
# this build being replaced, instead of a later rebuild picking the new base
# up silently.
resource "e2b_template_build" "app" {
  template_id   = e2b_template.app.id
  from_template = "base:${data.e2b_alias.base.build_id}"
  steps         = [{ run = { command = "echo 'built on base ${data.e2b_alias.base.build_id}' > /tmp/base-build" } }]
}

output "base_build_id" {
  value = data.e2b_alias.base.build_id
}
