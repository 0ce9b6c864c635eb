package command

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/sandboxes"
)

func TestParseServerFlagsAndEnv(t *testing.T) {
	t.Setenv("E2B_LOCAL_TEAM_SLUG", "from-env")
	t.Setenv("E2B_LOCAL_MAX_UPLOAD_BYTES", "1234")
	t.Setenv("E2B_LOCAL_LISTEN", "127.0.0.1:9")
	t.Setenv("E2B_LOCAL_MAX_LOG_ENTRIES", "77")
	t.Setenv("E2B_LOCAL_RUNTIME", "runsc")
	o, err := parseServer([]string{"--listen", "127.0.0.1:0", "--upload-url-ttl", "5m", "--max-log-bytes", "4096"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.Listen != "127.0.0.1:0" || o.TeamSlug != "from-env" || o.MaxUploadBytes != 1234 || o.UploadURLTTL != 5*time.Minute ||
		o.MaxLogEntries != 77 || o.MaxLogBytes != 4096 || o.Runtime != "runsc" {
		t.Errorf("options = %+v: flags must win over env, env over defaults", o)
	}
	t.Setenv("E2B_LOCAL_MAX_CPU", "many")
	if _, err := parseServer(nil, io.Discard); err == nil || !strings.Contains(err.Error(), "E2B_LOCAL_MAX_CPU") {
		t.Errorf("a bad env value: %v", err)
	}
	if _, err := parseServer([]string{"extra"}, io.Discard); err == nil {
		t.Error("stray arguments accepted")
	}
	for _, name := range []string{"E2B_LOCAL_MAX_CPU", "E2B_LOCAL_RUNTIME"} {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
	for _, bad := range [][]string{{"--egress", "all"}, {"--egress-allow", "nope"}, {"--network", "bridge"}, {"--runtime", ""}, {"--pool-max", "-1"}, {"--pool-idle", "-1s"}, {"--dns-upstream", "dns.example:53"}, {"--dns-upstream", "127.0.0.1"}} {
		if _, err := parseServer(bad, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	t.Setenv("E2B_LOCAL_ENVD_BINARY", "/opt/envd_linux_amd64,/opt/envd_linux_arm64")
	if o, err := parseServer(nil, io.Discard); err != nil || !slices.Equal(o.EnvdBinaries, []string{"/opt/envd_linux_amd64", "/opt/envd_linux_arm64"}) {
		t.Errorf("envd builds from the env = %q, %v; want both, in order", o.EnvdBinaries, err)
	}
	os.Unsetenv("E2B_LOCAL_ENVD_BINARY")
	o, err = parseServer(nil, io.Discard)
	if err != nil || o.EnvdBinaries != nil || o.Network != "none" || o.Egress != "public" || o.MaxConnections != localserver.DefaultMaxConnections ||
		o.MaxLogBytes != localserver.DefaultMaxLogBytes || o.Domain != localserver.DefaultDomain || o.Runtime != "auto" ||
		o.Pool != (sandboxes.PoolConfig{PerBuild: sandboxes.DefaultPoolSizePerBuild, Max: sandboxes.DefaultPoolMax, Idle: sandboxes.DefaultPoolIdle}) {
		t.Errorf("defaults = %+v, %v: want network none, egress public, runtime auto, domain %s, the default pool", o, err, localserver.DefaultDomain)
	}
	t.Setenv("E2B_LOCAL_POOL_SIZE_PER_BUILD", "0")
	if o, err := parseServer(nil, io.Discard); err != nil || o.Pool.PerBuild != 0 {
		t.Errorf("E2B_LOCAL_POOL_SIZE_PER_BUILD=0: %+v, %v; want the pool off", o.Pool, err)
	}
}

// TestServerPortInUseWritesNothing: a server that cannot listen fails before it
// writes anything, neither the data directory nor the API key in it.
func TestServerPortInUseWritesNothing(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dataDir := filepath.Join(t.TempDir(), "data")
	var stderr strings.Builder
	code := Server([]string{"--listen", taken.Addr().String(), "--data-dir", dataDir}, io.Discard, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "listen on "+taken.Addr().String()) {
		t.Errorf("exit %d, stderr %q; want 1 and the address at fault", code, stderr.String())
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data dir %s written before the listener was bound: %v", dataDir, err)
	}
}

// TestServerPruneWithoutEngine: prune names the engine that does not answer,
// and where its address came from, and exits 1; it makes no data dir.
func TestServerPruneWithoutEngine(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-engine.sock"))
	dataDir := filepath.Join(t.TempDir(), "data")
	var stdout, stderr strings.Builder
	code := Server([]string{"prune", "--data-dir", dataDir}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "no Docker engine answers at") || !strings.Contains(stderr.String(), "(DOCKER_HOST)") {
		t.Errorf("exit %d, stderr %q; want 1 and the engine at fault", code, stderr.String())
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("prune wrote the data dir %s: %v", dataDir, err)
	}
}
