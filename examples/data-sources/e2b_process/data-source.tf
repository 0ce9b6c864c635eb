resource "e2b_template" "app" {
  name = "my-app"
}

resource "e2b_template_build" "app" {
  template_id = e2b_template.app.id
  from_image  = "python:3.12-slim"
  tags        = ["candidate"]
}

# Runs in a new sandbox from the build, which is killed afterwards; on every
# plan and apply that reads it.
data "e2b_process" "version" {
  template = "${e2b_template.app.name}:${e2b_template_build.app.build_id}"
  command  = "python3 --version"
  env      = { PYTHONDONTWRITEBYTECODE = "1" }
  cwd      = "/tmp"
  user     = "root"
}

output "python_version" {
  value = data.e2b_process.version.stdout
}

# Program and arguments without a shell, with input and limits.
data "e2b_process" "checksum" {
  template            = "my-app:prod"
  cmd                 = "sha256sum"
  args                = ["-"]
  stdin               = "hello"
  timeout             = "30s"
  max_output_bytes    = 4096
  allow_non_zero_exit = true
}

output "checksum" {
  value = {
    exit_code        = data.e2b_process.checksum.exit_code
    stdout           = data.e2b_process.checksum.stdout
    stderr           = data.e2b_process.checksum.stderr
    stdout_truncated = data.e2b_process.checksum.stdout_truncated
    stderr_truncated = data.e2b_process.checksum.stderr_truncated
    sandbox_id       = data.e2b_process.checksum.sandbox_id
  }
}

# In a sandbox that is already running (it is left running).
variable "sandbox_id" {
  type = string
}

data "e2b_process" "uptime" {
  sandbox_id = var.sandbox_id
  command    = "uptime"
}
