# Staging: creates the template, builds the app and gives the build the tag
# "staging" once its smoke test passed. Applied on every merge (see README.md).

terraform {
  required_version = ">= 1.8"
  required_providers {
    e2b = {
      source  = "e2b-terraform/e2b"
      version = "~> 0.1"
    }
  }
}

# api_key (and api_url for a self-hosted or local server) from E2B_API_KEY,
# E2B_API_URL and E2B_SANDBOX_URL.
provider "e2b" {}

variable "template" {
  description = "Name of the template both environments share."
  type        = string
  default     = "promo-app"
}

variable "base_image" {
  description = "Base Docker image of the template."
  type        = string
  default     = "debian:bookworm-slim"
}

resource "e2b_template" "app" {
  name = var.template
}

module "release" {
  source = "../modules/release"

  template    = e2b_template.app.name
  template_id = e2b_template.app.id
  tag         = "staging"
  base_image  = var.base_image
  context     = abspath("${path.module}/../app")
}

output "build_id" {
  value = module.release.build_id
}

output "spec_hash" {
  value = module.release.spec_hash
}
