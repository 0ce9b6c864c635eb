# terraform query -generate-config-out=generated.tf (Terraform 1.14+) writes an
# e2b_template block and an import block for each template found.
list "e2b_template" "apps" {
  provider         = e2b
  include_resource = true

  config {
    name_prefix = "app-"
    public      = false
  }
}
