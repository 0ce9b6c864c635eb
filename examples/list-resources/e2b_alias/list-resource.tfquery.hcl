# The tags of one template; without config, the tags of every template.
list "e2b_alias" "app_tags" {
  provider         = e2b
  include_resource = true

  config {
    template = "app-web"
  }
}
