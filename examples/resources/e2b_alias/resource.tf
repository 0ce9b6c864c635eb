resource "e2b_template" "app" {
  name = "my-app"
}

# Tagged builds: a build without tags would take "default" itself, ahead of
# the alias and its gate (the plan warns).
resource "e2b_template_build" "app" {
  template_id = e2b_template.app.id
  from_image  = "python:3.12-slim"
  steps       = [{ run = { command = "pip install flask" } }]
  tags        = ["candidate"]
}

# Sandboxes started from "my-app:prod" run exactly this build, once its smoke
# test passed in a sandbox of its own. The gate runs when the alias is created
# and whenever build_id changes, never during plan or refresh; a non-zero exit
# stops the apply with the command's stderr and the tag stays where it was.
resource "e2b_alias" "prod" {
  template = e2b_template.app.name
  tag      = "prod"
  build_id = e2b_template_build.app.build_id

  gate = {
    command = "python3 -c 'import flask' && ./smoke-test.sh"
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

# "default" is what Sandbox.create("my-app") starts. Destroying this alias
# leaves E2B's default tag where it is.
resource "e2b_alias" "default" {
  template = e2b_template.app.name
  tag      = "default"
  build_id = e2b_alias.prod.build_id

  # A program and its arguments, without a shell.
  gate = {
    cmd  = "/usr/bin/python3"
    args = ["-c", "import flask"]
  }
}
