resource "e2b_template" "app" {
  name   = "my-app"
  public = false
}
