# A template another team manages, and the build its "prod" tag resolves to.
data "e2b_template" "base" {
  template = "base:prod"
}

output "base_build" {
  value = {
    id           = data.e2b_template.base.id
    build_id     = data.e2b_template.base.build_id
    build_status = data.e2b_template.base.build_status
    cpu_count    = data.e2b_template.base.cpu_count
    memory_mb    = data.e2b_template.base.memory_mb
  }
}

# The tags of each of its builds.
output "base_tags" {
  value = { for b in data.e2b_template.base.builds : b.build_id => b.tags }
}
