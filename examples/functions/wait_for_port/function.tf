resource "e2b_template" "web" {
  name = "web"
}

# The sandbox is ready once the server listens on port 8000.
resource "e2b_template_build" "web" {
  template_id = e2b_template.web.id
  from_image  = "python:3.12-slim"
  start_cmd   = "python -m http.server 8000"
  ready_cmd   = provider::e2b::wait_for_port(8000)
}
