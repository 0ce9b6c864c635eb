# By template ID or by name.
terraform import e2b_template.app abcdefghij0123456789
terraform import e2b_template.app my-template
