resource "e2b_template" "app" {
  name   = "my-app"
  public = false
}

output "template_id" {
  value = e2b_template.app.id
}
