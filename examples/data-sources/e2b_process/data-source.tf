variable "base_image" {
  description = "Base Docker image of the template, with Python 3."
  type        = string
  default     = "python:3.12-slim"
}

resource "e2b_template" "app" {
  name = "probed-app"
}

resource "e2b_template_build" "app" {
  template_id = e2b_template.app.id
  from_image  = var.base_image
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
  template            = "${e2b_template.app.name}:candidate"
  cmd                 = "sha256sum"
  args                = ["-"]
  stdin               = "hello"
  timeout             = "30s"
  max_output_bytes    = 4096
  allow_non_zero_exit = true
  depends_on          = [e2b_template_build.app]
}

output "checksum" {
  value = {
    exit_code        = data.e2b_process.checksum.exit_code
    stdout           = data.e2b_process.checksum.stdout
    stderr           = data.e2b_process.checksum.stderr
    stdout_truncated = data.e2b_process.checksum.stdout_truncated
    stderr_truncated = data.e2b_process.checksum.stderr_truncated
  }
}

# In a sandbox that is already running (it is left running); read only when
# a sandbox_id is given.
variable "sandbox_id" {
  type    = string
  default = null
}

data "e2b_process" "uptime" {
  count      = var.sandbox_id == null ? 0 : 1
  sandbox_id = var.sandbox_id
  command    = "uptime"
}
