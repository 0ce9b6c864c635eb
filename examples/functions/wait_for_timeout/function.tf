resource "e2b_template" "app" {
  name = "app"
}

# The sandbox is ready 5 seconds after the start command starts ("sleep 5").
resource "e2b_template_build" "app" {
  template_id = e2b_template.app.id
  from_image  = "node:22-slim"
  start_cmd   = "npm start"
  ready_cmd   = provider::e2b::wait_for_timeout(5000)
}
