variable "base_image" {
  description = "Base Docker image of the template."
  type        = string
  default     = "debian:bookworm-slim"
}

resource "e2b_template" "init" {
  name = "init"
}

# The sandbox is ready once the start command has written /tmp/ready.
resource "e2b_template_build" "init" {
  template_id = e2b_template.init.id
  from_image  = var.base_image
  start_cmd   = "date > /tmp/started-at && touch /tmp/ready && sleep infinity"
  ready_cmd   = provider::e2b::wait_for_file("/tmp/ready")
}
