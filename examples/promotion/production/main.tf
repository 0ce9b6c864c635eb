# Production: takes the build staging tested, by its spec hash (reuse), and
# gives it the tag "prod" once its smoke test passed again. Applied by the
# promotion job, after staging (see README.md). With the configuration staging
# tested it builds nothing; any other is refused before the tag moves (at
# plan when the build is known then).

terraform {
  required_version = ">= 1.8"
  required_providers {
    e2b = {
      source  = "e2b-terraform/e2b"
      version = "~> 0.1"
    }
  }
}

provider "e2b" {}

variable "template" {
  description = "Name of the template both environments share."
  type        = string
  default     = "promo-app"
}

variable "base_image" {
  description = "Base Docker image of the template: the same as staging's."
  type        = string
  default     = "debian:bookworm-slim"
}

# The template staging manages, and the build staging tested.
data "e2b_template" "app" {
  template = var.template
}

data "e2b_alias" "staging" {
  template = var.template
  tag      = "staging"
}

module "release" {
  source = "../modules/release"

  template        = var.template
  template_id     = data.e2b_template.app.id
  tag             = "prod"
  base_image      = var.base_image
  context         = abspath("${path.module}/../app")
  tested_build_id = data.e2b_alias.staging.build_id
}

output "build_id" {
  value = module.release.build_id
}

output "spec_hash" {
  value = module.release.spec_hash
}
