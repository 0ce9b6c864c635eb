# Terraform 1.10 and later: the output is never written to the plan or state,
# so a command can hand a secret to another provider's configuration.
ephemeral "e2b_process" "token" {
  template = "my-app:prod"
  command  = "cat /run/secrets/github-token"
}

provider "github" {
  token = trimspace(ephemeral.e2b_process.token.stdout)
}
