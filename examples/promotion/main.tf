# The same release module applied to two environments, each through its own
# provider configuration (two E2B teams, or two local servers).

terraform {
  required_version = ">= 1.8"
  required_providers {
    e2b = {
      source = "e2b-terraform/e2b"
    }
  }
}

variable "staging" {
  description = "API URL, key and sandbox URL of the staging environment."
  type = object({
    api_url     = string
    api_key     = string
    sandbox_url = optional(string)
  })
  sensitive = true
}

variable "production" {
  description = "API URL, key and sandbox URL of the production environment."
  type = object({
    api_url     = string
    api_key     = string
    sandbox_url = optional(string)
  })
  sensitive = true
}

variable "base_image" {
  type    = string
  default = "e2b-test-base:latest"
}

provider "e2b" {
  alias       = "staging"
  api_url     = var.staging.api_url
  api_key     = var.staging.api_key
  sandbox_url = var.staging.sandbox_url
}

provider "e2b" {
  alias       = "production"
  api_url     = var.production.api_url
  api_key     = var.production.api_key
  sandbox_url = var.production.sandbox_url
}

module "staging" {
  source    = "./modules/release"
  providers = { e2b = e2b.staging }

  name            = "promo-app"
  base_image      = var.base_image
  context         = "${path.module}/app"
  expected_output = "smoke test passed"
}

module "production" {
  source    = "./modules/release"
  providers = { e2b = e2b.production }

  name            = "promo-app"
  base_image      = var.base_image
  context         = "${path.module}/app"
  expected_output = "smoke test passed"

  # Production builds only what staging accepted.
  depends_on = [module.staging]
}

output "staging" {
  value = module.staging.prod
}

output "production" {
  value = module.production.prod
}
