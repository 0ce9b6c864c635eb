package provider

import "testing"

func TestAccFunctionWaitForTimeout_output(t *testing.T) {
	functionOutputs(t, map[string]struct{ expr, want string }{
		"seconds":       {`provider::e2b::wait_for_timeout(5000)`, `sleep 5`},
		"rounded_down":  {`provider::e2b::wait_for_timeout(2999)`, `sleep 2`},
		"at_least_one":  {`provider::e2b::wait_for_timeout(100)`, `sleep 1`},
		"zero":          {`provider::e2b::wait_for_timeout(0)`, `sleep 1`},
		"over_a_minute": {`provider::e2b::wait_for_timeout(90000)`, `sleep 90`},
	})
}

func TestAccFunctionWaitForTimeout_errors(t *testing.T) {
	functionErrors(t, map[string]struct{ expr, err string }{
		"negative": {`provider::e2b::wait_for_timeout(-1)`, `at least 0`},
	})
}
