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

variable "aws_access_key_id" {
  type      = string
  sensitive = true
}

variable "aws_secret_access_key" {
  type      = string
  sensitive = true
}

# From a private registry, built again every day to pick up the moving "latest"
# (a changed trigger replaces the build), without E2B's layer cache.
resource "e2b_template_build" "nightly" {
  template_id = e2b_template.app.id
  from_image  = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/base:latest"
  from_image_registry = {
    type                  = "aws"
    aws_access_key_id     = var.aws_access_key_id
    aws_secret_access_key = var.aws_secret_access_key
    aws_region            = "eu-west-1"
  }
  triggers = { day = formatdate("YYYY-MM-DD", plantimestamp()) }
  force    = true
  tags     = ["nightly"]

  timeouts = {
    create = "45m"
    update = "45m" # waiting for a build an earlier apply left running
  }
}

# On another template's build, with COPY sources hashed as the E2B SDKs hash
# them, so that their uploads are shared with SDK users of the team.
resource "e2b_template_build" "on_base" {
  template_id   = e2b_template.app.id
  from_template = "base:prod"
  context       = "${path.module}/app"
  files_hash    = "e2b-sdk"
  steps = [
    { user = "app" },
    { copy = { src = "src", dest = "/app/src", user = "app", resolve_symlinks = true } },
  ]
  tags = ["candidate"]
}
