# Terraform 1.14 and later. A smoke test in a sandbox of every new build, right after
# the build is created or replaced; its output lines show as progress while it runs,
# and a non-zero exit fails the apply (the build itself stays created).
resource "e2b_template" "app" {
  name = "app-web"
}

resource "e2b_template_build" "app" {
  template_id = e2b_template.app.id
  from_image  = "python:3.12-slim"
  tags        = ["latest"]

  lifecycle {
    action_trigger {
      events  = [after_create, after_update]
      actions = [action.e2b_process.smoke]
    }
  }
}

action "e2b_process" "smoke" {
  config {
    template = "${e2b_template.app.name}:${e2b_template_build.app.build_id}"
    command  = "python3 -c 'import sys; print(sys.version)'"
    timeout  = "2m"
  }
}

# Run alone, from CI or by hand, without changing anything else:
#   terraform apply -invoke=action.e2b_process.warmup
action "e2b_process" "warmup" {
  config {
    template = "app-web:latest"
    cmd      = "/usr/local/bin/warm-cache"
    args     = ["--all"]
    env      = { CACHE_TOKEN = var.cache_token }
    timeout  = "10m"
  }
}

variable "cache_token" {
  type      = string
  sensitive = true
}
