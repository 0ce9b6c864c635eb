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
  description = "Where the staging environment is, and the template's name there."
  type = object({
    api_url       = string
    sandbox_url   = optional(string)
    template_name = optional(string, "promo-app")
  })
}

variable "production" {
  description = "Where the production environment is, and the template's name there."
  type = object({
    api_url       = string
    sandbox_url   = optional(string)
    template_name = optional(string, "promo-app")
  })
}

variable "staging_api_key" {
  type      = string
  sensitive = true
}

variable "production_api_key" {
  type      = string
  sensitive = true
}

variable "base_image" {
  type    = string
  default = "e2b-test-debian:bookworm"
}

provider "e2b" {
  alias       = "staging"
  api_url     = var.staging.api_url
  api_key     = var.staging_api_key
  sandbox_url = var.staging.sandbox_url
}

provider "e2b" {
  alias       = "production"
  api_url     = var.production.api_url
  api_key     = var.production_api_key
  sandbox_url = var.production.sandbox_url
}

module "staging" {
  source    = "./modules/release"
  providers = { e2b = e2b.staging }

  name            = var.staging.template_name
  base_image      = var.base_image
  context         = abspath("${path.module}/app")
  expected_output = "smoke test passed"
}

module "production" {
  source    = "./modules/release"
  providers = { e2b = e2b.production }

  name            = var.production.template_name
  base_image      = var.base_image
  context         = abspath("${path.module}/app")
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
