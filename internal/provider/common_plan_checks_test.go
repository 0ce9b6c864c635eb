package provider

import (
	"net"
	"regexp"
	"sync"
	"testing"

	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// TestAccProvider_apiKeyRefused plans with a key the local server does not know: the
// plan fails on api_key, naming where the key came from and where the server's key is.
func TestAccProvider_apiKeyRefused(t *testing.T) {
	srv := localServer(t)
	const wrongKey = "e2b_00000000000000000000000000000000deadbeef"
	template := `
resource "e2b_template" "t" {
  name = "acc-key-refused"
}
`
	for name, c := range map[string]struct{ block, env, source string }{
		"provider block": {`api_key = "` + wrongKey + `"`, "", `provider\s+block's\s+api_key`},
		"environment":    {"", wrongKey, `E2B_API_KEY\s+environment\s+variable`},
	} {
		t.Run(name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv(EnvAPIKey, c.env)
			}
			tfresource.Test(t, tfresource.TestCase{
				ProtoV6ProviderFactories: factories(),
				Steps: []tfresource.TestStep{{
					Config:      "provider \"e2b\" {\n  api_url = \"" + srv.APIURL + "\"\n  " + c.block + "\n}\n" + template,
					PlanOnly:    true,
					ExpectError: regexp.MustCompile(`(?s)API key refused.*` + c.source + `.*printed\s+as\s+E2B_API_KEY.*api-key`),
				}},
			})
		})
	}
}

// TestAccProvider_apiSilent plans against an API that accepts connections and never
// answers: the key check gives up after request_timeout and the plan goes on.
func TestAccProvider_apiSilent(t *testing.T) {
	accPreCheck(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held sync.WaitGroup
	t.Cleanup(func() { ln.Close(); held.Wait() })
	held.Add(1)
	go func() {
		defer held.Done()
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // held open, never answered
		}
	}()
	tfresource.UnitTest(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{{
			Config: `
provider "e2b" {
  api_url         = "http://` + ln.Addr().String() + `"
  api_key         = "e2b_0123456789abcdef"
  request_timeout = "1s"
}

resource "e2b_template" "t" {
  name = "acc-api-silent"
}
`,
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
		}},
	})
}
