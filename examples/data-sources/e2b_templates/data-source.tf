# The team's private templates whose names start with "app-".
data "e2b_templates" "apps" {
  name_prefix = "app-"
  public      = false
}

output "apps" {
  value = {
    for t in data.e2b_templates.apps.templates : t.name => {
      id            = t.id
      default_build = t.default_build_id
      tags          = t.tags
    }
  }
}
