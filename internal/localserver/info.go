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
}

// InfoFile is the name of the Info file in the data directory.
const InfoFile = "server.json"
