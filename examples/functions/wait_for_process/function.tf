resource "e2b_template" "daemon" {
  name = "daemon"
}

# The sandbox is ready once a process named my-daemon runs.
resource "e2b_template_build" "daemon" {
  template_id = e2b_template.daemon.id
  from_image  = "debian:bookworm-slim"
  start_cmd   = "/usr/local/bin/my-daemon"
  ready_cmd   = provider::e2b::wait_for_process("my-daemon")
}
