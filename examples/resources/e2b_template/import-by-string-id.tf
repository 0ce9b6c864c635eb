# By template ID or by name.
import {
  to = e2b_template.app
  id = "my-template"
}
