variable "base_image" {
  description = "Base Docker image of the template."
  type        = string
  default     = "debian:bookworm-slim"
}

resource "e2b_template" "api" {
  name = "api"
}

# The sandbox is ready once the health check answers 200 (the default status).
# The ready command runs curl, which E2B's base image has and slim images lack:
# the first step installs it, and Python for the server, when missing.
resource "e2b_template_build" "api" {
  template_id = e2b_template.api.id
  from_image  = var.base_image
  steps = [
    { run = { command = "{ command -v curl && command -v python3; } >/dev/null || (apt-get update && apt-get install -y --no-install-recommends curl python3)", user = "root" } },
    { run = { command = "mkdir -p /srv/api && echo ok > /srv/api/health", user = "root" } },
  ]
  start_cmd = "python3 -m http.server 3000 --directory /srv/api"
  ready_cmd = provider::e2b::wait_for_url("http://localhost:3000/health")
}

# Another status: the second argument is optional.
output "ready_on_204" {
  value = provider::e2b::wait_for_url("http://localhost:3000/ping", 204)
}
