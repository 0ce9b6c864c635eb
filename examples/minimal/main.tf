# The README's minimal configuration: a template, a build from a Dockerfile,
# and a prod tag that moves to the build once its smoke test passed.

terraform {
  required_providers {
    e2b = {
      source  = "e2b-terraform/e2b"
      version = "~> 0.1"
    }
  }
}

provider "e2b" {} # api_key from E2B_API_KEY

variable "base_image" {
  description = "Base Docker image, with Python 3."
  type        = string
  default     = "python:3.12-slim"
}

resource "e2b_template" "app" {
  name = "my-app"
}

# ./app holds the Dockerfile and what it copies; it is hashed at plan time.
resource "e2b_template_build" "app" {
  template_id = e2b_template.app.id
  dockerfile  = "${path.module}/app/Dockerfile"
  build_args  = { BASE_IMAGE = var.base_image }
  ready_cmd   = provider::e2b::wait_for_port(8080)
  tags        = ["candidate"]
}

# Sandboxes started from "my-app:prod" run this build once its smoke test
# passed in a sandbox of it; until then they keep the previous one.
resource "e2b_alias" "prod" {
  template = e2b_template.app.name
  tag      = "prod"
  build_id = e2b_template_build.app.build_id

  gate = {
    command = "/app/smoke-test.sh"
    timeout = "5m"
  }
}
