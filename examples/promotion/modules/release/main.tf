# One environment's release of the app: a build of ./app (reused when a ready
# build of the template has the same spec_hash), smoke-tested in a sandbox of
# exactly that build, then given the environment's tag. Sandboxes started from
# "<template>:<tag>" keep running the previous build until the test passed.

terraform {
  required_providers {
    e2b = {
      source  = "e2b-terraform/e2b"
      version = "~> 0.1"
    }
  }
}

variable "template" {
  description = "Name of the template."
  type        = string
}

variable "template_id" {
  description = "ID of the template."
  type        = string
}

variable "tag" {
  description = "The environment's tag, moved to the build once its smoke test passed."
  type        = string
}

variable "base_image" {
  description = "Base Docker image of the template."
  type        = string
}

variable "context" {
  description = "Build context directory: the app."
  type        = string
}

variable "expected_output" {
  description = "What the smoke test must print for the build to get the tag."
  type        = string
  default     = "smoke test passed"
}

variable "tested_build_id" {
  description = "When set, the only build this release may tag: the one an earlier environment tested."
  type        = string
  default     = null
}

# With reuse, the same inputs give the same spec_hash everywhere (any machine,
# any checkout path), and a ready build of the template tagged with it is
# taken instead of building again.
resource "e2b_template_build" "release" {
  template_id = var.template_id
  from_image  = var.base_image
  context     = var.context
  reuse       = true
  tags        = ["candidate"]

  steps = [
    { workdir = "/app" },
    { copy = { src = "smoke.sh", dest = "/app/smoke.sh", mode = "0755" } },
    { copy = { src = "version.txt", dest = "/app/version.txt" } },
  ]
}

# The gate runs when the build changes, never during plan or refresh; a failing
# smoke test stops the apply with its stderr, and the tag stays where it was.
resource "e2b_alias" "this" {
  template = var.template
  tag      = var.tag
  build_id = e2b_template_build.release.build_id

  gate = {
    cmd     = "/app/smoke.sh"
    env     = { EXPECTED_OUTPUT = var.expected_output }
    timeout = "2m"
  }

  lifecycle {
    precondition {
      condition     = var.tested_build_id == null || e2b_template_build.release.build_id == var.tested_build_id
      error_message = "This release would tag build ${e2b_template_build.release.build_id}, not the tested build ${coalesce(var.tested_build_id, "-")}: apply the earlier environment with the same configuration first."
    }
  }
}

output "build_id" {
  value = e2b_alias.this.build_id
}

output "spec_hash" {
  value = e2b_template_build.release.spec_hash
}
