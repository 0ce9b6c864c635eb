package docker

import (
	"github.com/docker/docker/api/types/container"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
)

// Every sandbox and build container is named as E2B names its sandboxes,
// and its name resolves as in E2B's /etc/hosts: on a network of its own
// (none) the engine writes no entry for a container's name, so sudo and
// other tools printed "unable to resolve host <container id>".
const (
	sandboxHostname = "e2b.local"
	sandboxHostIP   = "127.0.1.1"
)

// sandboxResolver is the container's nameserver: the channel agent, which
// sends every query to the server (relay.AgentOptions.DNSListen).
const sandboxResolver = "127.0.0.1"

// nameContainer gives a container E2B's host name and its /etc/hosts entry
// (the engine's /etc/hosts, which has localhost, bound over the image's),
// and a resolv.conf naming the agent's resolver alone, without the host's
// search domains. On the host's network the container has the host's name
// and the host's resolvers, as before.
func nameContainer(cfg *container.Config, hc *container.HostConfig, network string) {
	if network == engine.NetworkHost {
		return
	}
	cfg.Hostname = sandboxHostname
	hc.ExtraHosts = append(hc.ExtraHosts, sandboxHostname+":"+sandboxHostIP)
	hc.DNS = []string{sandboxResolver}
	hc.DNSSearch = []string{"."}
}
