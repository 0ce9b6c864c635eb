# One environment's release: build a candidate, smoke-test it in a sandbox,
# and move the :prod tag to it only when the test passes. Sandboxes started
# from "<name>:prod" keep running the previous build until then.

terraform {
  required_providers {
    e2b = {
      source = "e2b-terraform/e2b"
    }
  }
}

variable "name" {
  description = "Template name in this environment."
  type        = string
}

variable "base_image" {
  description = "Base Docker image of the template."
  type        = string
}

variable "context" {
  description = "Build context directory."
  type        = string
}

variable "expected_output" {
  description = "What the smoke test must print for the candidate to be promoted."
  type        = string
}

resource "e2b_template" "this" {
  name = var.name
}

resource "e2b_template_build" "candidate" {
  template_id = e2b_template.this.id
  from_image  = var.base_image
  context     = var.context
  tags        = ["candidate"]

  steps = [
    { workdir = "/app" },
    { copy = { src = "smoke.sh", dest = "/app/smoke.sh", mode = "0755" } },
    { copy = { src = "version.txt", dest = "/app/version.txt" } },
  ]
}

# The smoke test runs in a sandbox from exactly the candidate build.
data "e2b_process" "smoke" {
  template            = "${e2b_template.this.name}:${e2b_template_build.candidate.build_id}"
  cmd                 = "/app/smoke.sh"
  timeout             = "2m"
  allow_non_zero_exit = true

  lifecycle {
    postcondition {
      condition     = self.exit_code == 0 && strcontains(self.stdout, var.expected_output)
      error_message = "Smoke test of build ${e2b_template_build.candidate.build_id} failed (exit ${self.exit_code}): ${self.stdout}${self.stderr}"
    }
  }
}

# Depends on the smoke test: a failed postcondition stops the apply before
# the tag moves.
resource "e2b_alias" "prod" {
  template = e2b_template.this.name
  tag      = "prod"
  build_id = e2b_template_build.candidate.build_id

  depends_on = [data.e2b_process.smoke]
}

output "prod" {
  value = "${e2b_template.this.name}:prod -> ${e2b_alias.prod.build_id}"
}
