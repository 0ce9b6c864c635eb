# Terraform 1.10 and later, OpenTofu 1.11 and later: the output is never
# written to the plan or state, so a command can hand a secret to a provider
# configuration. Here the API key of the production team comes from a sandbox
# of a secrets template that only the staging team can start. It takes the
# arguments of the e2b_process data source.
ephemeral "e2b_process" "production_key" {
  template = "secrets:prod"
  command  = "cat /run/secrets/e2b-production-key"
  user     = "root"
  timeout  = "30s"
}

provider "e2b" {
  alias   = "production"
  api_key = trimspace(ephemeral.e2b_process.production_key.stdout)
}

# Reads production's "base:prod" with that key.
data "e2b_alias" "production_base" {
  provider = e2b.production
  template = "base"
  tag      = "prod"
}

output "production_base_build" {
  value = data.e2b_alias.production_base.build_id
}
