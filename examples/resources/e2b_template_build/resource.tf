resource "e2b_template" "app" {
  name = "my-app"
}

# A build from a base image and explicit steps; COPY sources are taken from
# the context directory and hashed at plan time. With reuse, another state of
# the same configuration (a fresh CI run, a second workspace) takes this build
# instead of building it again.
resource "e2b_template_build" "app" {
  template_id = e2b_template.app.id
  from_image  = "ubuntu:22.04"
  context     = "${path.module}/app"
  reuse       = true

  steps = [
    { run = { command = "apt-get update && apt-get install -y python3", user = "root" } },
    { copy = { src = "requirements.txt", dest = "/app/" } },
    { copy = { src = "src", dest = "/app/src", mode = "0755" } },
    { env = { PYTHONUNBUFFERED = "1" } },
    { workdir = "/app" },
  ]

  start_cmd = "python3 -m http.server 8000"
  ready_cmd = "sleep 2"
  cpu_count = 2
  memory_mb = 1024
  tags      = ["candidate"]

  timeouts = {
    create = "30m"
  }
}

# The same from a Dockerfile; the context defaults to its directory.
resource "e2b_template_build" "from_dockerfile" {
  template_id = e2b_template.app.id
  dockerfile  = "${path.module}/app/Dockerfile"
}
