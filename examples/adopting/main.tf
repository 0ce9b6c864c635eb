# Adopts every template whose name starts with var.name_prefix, with any CLI that
# imports by identity (OpenTofu 1.12+, Terraform 1.12+): the data source finds them,
# one import block per template brings each under the e2b_template of its name.
terraform {
  required_providers {
    e2b = {
      source = "e2b-terraform/e2b"
    }
  }
}

variable "name_prefix" {
  type    = string
  default = "app-"
}

data "e2b_templates" "found" {
  name_prefix = var.name_prefix
}

locals {
  templates = { for t in data.e2b_templates.found.templates : t.name => t }
}

import {
  for_each = local.templates
  to       = e2b_template.adopted[each.key]
  identity = { id = each.value.id }
}

resource "e2b_template" "adopted" {
  for_each = local.templates
  name     = each.key
  public   = each.value.public
}
