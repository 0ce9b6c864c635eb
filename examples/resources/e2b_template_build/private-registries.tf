# Beside resource.tf: builds from private registries, which need their
# credentials, and from another team's template.

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
