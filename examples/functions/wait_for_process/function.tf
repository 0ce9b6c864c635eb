variable "base_image" {
  description = "Base Docker image of the template."
  type        = string
  default     = "debian:bookworm-slim"
}

resource "e2b_template" "daemon" {
  name = "daemon"
}

# The sandbox is ready once a process named my-daemon runs. The ready command
# runs pgrep (procps), which E2B's base image has and slim images lack: the
# first step installs it when missing.
resource "e2b_template_build" "daemon" {
  template_id = e2b_template.daemon.id
  from_image  = var.base_image
  steps = [
    { run = { command = "command -v pgrep >/dev/null || (apt-get update && apt-get install -y --no-install-recommends procps)", user = "root" } },
    { run = { command = "printf '#!/bin/sh\\nwhile :; do date > /tmp/my-daemon.beat; sleep 1; done\\n' > /usr/local/bin/my-daemon && chmod 755 /usr/local/bin/my-daemon", user = "root" } },
  ]
  start_cmd = "/usr/local/bin/my-daemon"
  ready_cmd = provider::e2b::wait_for_process("my-daemon")
}
