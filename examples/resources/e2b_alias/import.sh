# template:tag
terraform import e2b_alias.prod gated-app:prod
