variable "base_image" {
  description = "Base Docker image of the builds, with Python 3."
  type        = string
  default     = "python:3.12-slim"
}

resource "e2b_template" "app" {
  name = "built-app"
}

# A build from a base image and explicit steps; COPY sources are taken from
# the context directory and hashed at plan time. With reuse, another state of
# the same configuration (a fresh CI run, a second workspace) takes this build
# instead of building it again.
resource "e2b_template_build" "app" {
  template_id = e2b_template.app.id
  from_image  = var.base_image
  context     = "${path.module}/app"
  reuse       = true

  steps = [
    { workdir = "/app" },
    { copy = { src = "requirements.txt", dest = "/app/" } },
    { copy = { src = "src", dest = "/app/src", mode = "0755" } },
    { env = { PYTHONUNBUFFERED = "1" } },
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
# build_args set its ARGs; steps run after its own.
resource "e2b_template_build" "from_dockerfile" {
  template_id = e2b_template.app.id
  dockerfile  = "${path.module}/app/Dockerfile"
  build_args  = { BASE_IMAGE = var.base_image }
  ready_cmd   = "sleep 2"

  steps = [
    # Joined with " && ", as the SDK's runCmd([...]).
    { run = { commands = ["python3 -m compileall -q /app/src", "python3 --version > /app/python-version"], user = "root" } },
    # This step and every later one run without E2B's layer cache.
    { run = { command = "date -u > /app/built-at", user = "root" }, skip_cache = true },
    # Uploaded on every build, even when E2B has the archive.
    { copy = { src = "config", dest = "/app/config", force_upload = true } },
  ]
}

output "build_ids" {
  value = {
    steps      = e2b_template_build.app.build_id
    dockerfile = e2b_template_build.from_dockerfile.build_id
  }
}
