resource "e2b_template" "app" {
  name = "my-app"
}

# A build from a base image and explicit steps; COPY sources are taken from
# the context directory and hashed at plan time.
resource "e2b_template_build" "app" {
  template_id = e2b_template.app.id
  from_image  = "ubuntu:22.04"
  context     = "${path.module}/app"

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
# build_args set its ARGs; steps run after its own.
resource "e2b_template_build" "from_dockerfile" {
  template_id = e2b_template.app.id
  dockerfile  = "${path.module}/app/Dockerfile"
  build_args  = { PYTHON_VERSION = "3.12" }

  steps = [
    # Joined with " && ", as the SDK's runCmd([...]).
    { run = { commands = ["pip install -r /app/requirements.txt", "python3 -m compileall /app"] } },
    # This step and every later one run without E2B's layer cache.
    { run = { command = "apt-get update && apt-get upgrade -y", user = "root" }, skip_cache = true },
    # Uploaded on every build, even when E2B has the archive.
    { copy = { src = "config", dest = "/app/config", force_upload = true } },
  ]
}

# A private base image. The write-only password (Terraform or OpenTofu 1.11+) is
# sent to E2B and never stored in the state; raise password_wo_version to make a
# new build with a new password. The plain `password` would be kept in the state.
variable "registry_password" {
  type      = string
  sensitive = true
  ephemeral = true
}

resource "e2b_template_build" "private_base" {
  template_id = e2b_template.app.id
  from_image  = "registry.example.com/team/base:1.4"

  from_image_registry = {
    type                = "registry"
    username            = "robot"
    password_wo         = var.registry_password
    password_wo_version = 1
  }
}
