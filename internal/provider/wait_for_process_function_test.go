package provider

import "testing"

func TestAccFunctionWaitForProcess_output(t *testing.T) {
	functionOutputs(t, map[string]struct{ expr, want string }{
		"plain":  {`provider::e2b::wait_for_process("nginx")`, `pgrep nginx > /dev/null`},
		"quoted": {`provider::e2b::wait_for_process("my daemon")`, `pgrep 'my daemon' > /dev/null`},
	})
}

func TestAccFunctionWaitForProcess_errors(t *testing.T) {
	functionErrors(t, map[string]struct{ expr, err string }{
		"empty": {`provider::e2b::wait_for_process("")`, `length must be at least 1`},
	})
}
