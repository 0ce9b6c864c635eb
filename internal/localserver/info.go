package localserver

// Info is what a started server tells its users, printed on stdout and
// written to <data-dir>/server.json (0600: it holds the API key) so that
// scripts and tests can find the server.
type Info struct {
	APIURL     string `json:"api_url"`
	SandboxURL string `json:"sandbox_url"`
	Domain     string `json:"domain"`
	APIKey     string `json:"api_key"`
	PID        int    `json:"pid"`
	DataDir    string `json:"data_dir"`
	// Runtime is the OCI runtime of the server's sandbox and build
	// containers, and GVisor whether it is gVisor's (a kernel of their own).
	Runtime string `json:"runtime"`
	GVisor  bool   `json:"gvisor"`
}

// InfoFile is the name of the Info file in the data directory.
const InfoFile = "server.json"
