variable "base_image" {
  description = "Base Docker image of the template."
  type        = string
  default     = "debian:bookworm-slim"
}

resource "e2b_template" "app" {
  name = "gated-app"
}

# Tagged builds: a build without tags would take "default" itself, ahead of
# the alias and its gate (the plan warns). The build writes the smoke test
# that the gate runs.
resource "e2b_template_build" "app" {
  template_id = e2b_template.app.id
  from_image  = var.base_image
  tags        = ["candidate"]
  steps = [
    { workdir = "/app" },
    { run = { command = "echo 1.0.0 > /app/version.txt" } },
    { run = { command = "printf '#!/bin/sh\\ntest -s /app/version.txt && echo \"smoke test passed ($APP_ENV)\"\\n' > /app/smoke-test.sh && chmod 755 /app/smoke-test.sh" } },
  ]
}

# Sandboxes started from "gated-app:prod" run exactly this build, once its
# smoke test passed in a sandbox of its own. The gate runs when the alias is
# created and whenever build_id changes, never during plan or refresh; a
# non-zero exit stops the apply with the command's stderr and the tag stays
# where it was.
resource "e2b_alias" "prod" {
  template = e2b_template.app.name
  tag      = "prod"
  build_id = e2b_template_build.app.build_id

  gate = {
    command = "./smoke-test.sh | grep -q 'smoke test passed'"
    env     = { APP_ENV = "gate" }
    cwd     = "/app"
    user    = "user"
    timeout = "5m"
  }

  timeouts = {
    create = "15m"
    update = "15m"
  }
}

# "default" is what Sandbox.create("gated-app") starts. Destroying this alias
# leaves E2B's default tag where it is.
resource "e2b_alias" "default" {
  template = e2b_template.app.name
  tag      = "default"
  build_id = e2b_alias.prod.build_id

  # A program and its arguments, without a shell.
  gate = {
    cmd  = "/bin/test"
    args = ["-x", "/app/smoke-test.sh"]
  }
}
