package provider

import "testing"

func TestAccFunctionWaitForPort_output(t *testing.T) {
	functionOutputs(t, map[string]struct{ expr, want string }{
		"http": {`provider::e2b::wait_for_port(80)`, `[ -n "$(ss -Htuln sport = :80)" ]`},
		"app":  {`provider::e2b::wait_for_port(8000)`, `[ -n "$(ss -Htuln sport = :8000)" ]`},
	})
}

func TestAccFunctionWaitForPort_errors(t *testing.T) {
	functionErrors(t, map[string]struct{ expr, err string }{
		"port 0":        {`provider::e2b::wait_for_port(0)`, `between 1 and 65535`},
		"port too high": {`provider::e2b::wait_for_port(65536)`, `between 1 and 65535`},
		"fraction":      {`provider::e2b::wait_for_port(80.5)`, `Invalid value for "port" parameter`},
	})
}
