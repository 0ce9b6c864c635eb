resource "e2b_template" "api" {
  name = "api"
}

# The sandbox is ready once the health check answers 200 (the default status).
resource "e2b_template_build" "api" {
  template_id = e2b_template.api.id
  from_image  = "node:22-slim"
  start_cmd   = "npm start"
  ready_cmd   = provider::e2b::wait_for_url("http://localhost:3000/health")
}

# Another status: the second argument is optional.
output "ready_on_204" {
  value = provider::e2b::wait_for_url("http://localhost:3000/ping", 204)
}
