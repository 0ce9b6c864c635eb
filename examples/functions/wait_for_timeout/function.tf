variable "base_image" {
  description = "Base Docker image of the template."
  type        = string
  default     = "debian:bookworm-slim"
}

resource "e2b_template" "app" {
  name = "warm-app"
}

# The sandbox is ready 5 seconds after the start command starts ("sleep 5"):
# for a start command that says nothing about when it is ready.
resource "e2b_template_build" "app" {
  template_id = e2b_template.app.id
  from_image  = var.base_image
  start_cmd   = "sleep infinity"
  ready_cmd   = provider::e2b::wait_for_timeout(5000)
}
