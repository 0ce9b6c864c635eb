resource "e2b_template" "app" {
  name   = "my-template"
  public = false
}

output "template_id" {
  value = e2b_template.app.id
}
