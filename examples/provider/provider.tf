terraform {
  required_providers {
    e2b = {
      source  = "e2b-terraform/e2b"
      version = "~> 0.1"
    }
  }
}

# E2B's hosted service: the API key comes from E2B_API_KEY when not set here.
provider "e2b" {
  api_key = var.e2b_api_key # or leave out and export E2B_API_KEY
}

variable "e2b_api_key" {
  type      = string
  sensitive = true
  default   = null
}

# The E2B-compatible local server this provider's binary carries
# (`terraform-provider-e2b server`), listening on loopback: plain http is
# accepted for loopback addresses only.
#
# provider "e2b" {
#   api_url     = "http://127.0.0.1:3000"
#   api_key     = "e2b_0000000000000000000000000000000000000000"
#   max_retries = 2
# }
