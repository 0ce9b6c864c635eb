# template:tag
terraform import e2b_alias.prod my-app:prod
