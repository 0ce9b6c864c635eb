# The quick start: a template built from ./context with COPY and RUN, a tag
# pointing at the build, and a command run in a sandbox from that tag.
# scripts/quickstart.sh applies it to the local server and destroys it again;
# with E2B_API_KEY set (and base_image = "ubuntu:22.04") it runs on E2B.

terraform {
  required_version = ">= 1.8"
  required_providers {
    e2b = {
      source  = "e2b-terraform/e2b"
      version = "~> 0.1"
    }
  }
}

# api_url, api_key and sandbox_url come from E2B_API_URL, E2B_API_KEY and
# E2B_SANDBOX_URL, which the local server prints when it starts.
provider "e2b" {}

variable "name" {
  description = "Template name."
  type        = string
  default     = "quickstart"
}

variable "base_image" {
  description = "Base Docker image (by default the Debian image scripts/test-image.sh builds offline)."
  type        = string
  default     = "e2b-test-debian:bookworm"
}

resource "e2b_template" "hello" {
  name = var.name
}

resource "e2b_template_build" "hello" {
  template_id = e2b_template.hello.id
  from_image  = var.base_image
  context     = abspath("${path.module}/context")

  steps = [
    { workdir = "/app" },
    { copy = { src = "greeting.txt", dest = "/app/" } },
    { copy = { src = "bin", dest = "/app/bin", mode = "0755" } },
    { env = { GREETING_FILE = "/app/greeting.txt" } },
    { run = { command = "/app/bin/hello.sh > /app/built-at-build-time.txt" } },
  ]
}

resource "e2b_alias" "live" {
  template = e2b_template.hello.name
  tag      = "live"
  build_id = e2b_template_build.hello.build_id
}

# Runs in a new sandbox started from name:live, killed afterwards.
data "e2b_process" "hello" {
  template = "${e2b_template.hello.name}:${e2b_alias.live.tag}"
  command  = "cat /app/built-at-build-time.txt && /app/bin/hello.sh sandbox"
}

output "template" {
  value = "${e2b_template.hello.name}:${e2b_alias.live.tag} = build ${e2b_alias.live.build_id}"
}

output "copy_hashes" {
  value = e2b_template_build.hello.copy_hashes
}

output "hello" {
  value = data.e2b_process.hello.stdout
}
