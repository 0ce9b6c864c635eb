# The build another team's "base:prod" tag points at now.
data "e2b_alias" "base" {
  template = "base"
  tag      = "prod"
}

resource "e2b_template" "app" {
  name = "my-app"
}

# Built on exactly that build: when the base team moves "prod", the plan shows
# this build being replaced, instead of a later rebuild picking the new base
# up silently.
resource "e2b_template_build" "app" {
  template_id   = e2b_template.app.id
  from_template = "base:${data.e2b_alias.base.build_id}"
  steps         = [{ run = { command = "pip install -r /app/requirements.txt" } }]
}
