package provider

import "testing"

func TestAccFunctionWaitForURL_output(t *testing.T) {
	functionOutputs(t, map[string]struct{ expr, want string }{
		"default_status": {`provider::e2b::wait_for_url("http://localhost:3000/health")`,
			`curl -s -o /dev/null -w "%{http_code}" http://localhost:3000/health | grep -q "200"`},
		"quoted": {`provider::e2b::wait_for_url("http://localhost:3000/health?ready=1&x=y")`,
			`curl -s -o /dev/null -w "%{http_code}" 'http://localhost:3000/health?ready=1&x=y' | grep -q "200"`},
		"status": {`provider::e2b::wait_for_url("http://localhost:8080/", 204)`,
			`curl -s -o /dev/null -w "%{http_code}" http://localhost:8080/ | grep -q "204"`},
	})
}

func TestAccFunctionWaitForURL_errors(t *testing.T) {
	functionErrors(t, map[string]struct{ expr, err string }{
		"two statuses": {`provider::e2b::wait_for_url("http://localhost/", 200, 204)`, `one status code at most`},
		"bad status":   {`provider::e2b::wait_for_url("http://localhost/", 99)`, `between 100 and 599`},
	})
}
