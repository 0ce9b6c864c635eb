# One environment's release: build a candidate, smoke-test it in a sandbox,
# and move the :prod tag to it only when the test passes (the alias's gate). Sandboxes started
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

# Moves :prod to the candidate once its smoke test passed in a sandbox of
# exactly that build. The gate runs when the candidate changes, never during
# plan or refresh; a failing test stops the apply with its stderr, and :prod
# stays on the build that passed.
resource "e2b_alias" "prod" {
  template = e2b_template.this.name
  tag      = "prod"
  build_id = e2b_template_build.candidate.build_id

  gate = {
    cmd     = "/app/smoke.sh"
    env     = { EXPECTED_OUTPUT = var.expected_output }
    timeout = "2m"
  }
}

output "prod" {
  value = "${e2b_template.this.name}:prod -> ${e2b_alias.prod.build_id}"
}
