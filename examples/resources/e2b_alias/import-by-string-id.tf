# template:tag
import {
  to = e2b_alias.prod
  id = "gated-app:prod"
}
