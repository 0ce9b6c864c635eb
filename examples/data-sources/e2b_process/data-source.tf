# Runs in a new sandbox from the build, which is killed afterwards.
data "e2b_process" "version" {
  template = "${e2b_template.app.name}:${e2b_template_build.app.build_id}"
  command  = "python3 --version"
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
