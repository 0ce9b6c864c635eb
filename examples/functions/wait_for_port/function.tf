variable "base_image" {
  description = "Base Docker image of the template."
  type        = string
  default     = "debian:bookworm-slim"
}

resource "e2b_template" "web" {
  name = "web"
}

# The sandbox is ready once the server listens on port 8000. The ready
# command runs ss (iproute2), which E2B's base image has and slim images lack:
# the first step installs it, and Python for the server, when missing.
resource "e2b_template_build" "web" {
  template_id = e2b_template.web.id
  from_image  = var.base_image
  steps = [
    { run = { command = "{ command -v ss && command -v python3; } >/dev/null || (apt-get update && apt-get install -y --no-install-recommends iproute2 python3)", user = "root" } },
  ]
  start_cmd = "python3 -m http.server 8000"
  ready_cmd = provider::e2b::wait_for_port(8000)
}
