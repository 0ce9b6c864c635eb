# The builds of one template, newest first, with their status, tags and creation time.
list "e2b_template_build" "app_builds" {
  provider         = e2b
  include_resource = true

  config {
    template = "app-web"
  }
}
