package provider

import "sync"

// leftRunningBuilds are the builds an earlier apply left running, as one provider
// instance saw them in the state of an e2b_template_build it refreshed or destroyed, by
// template and spec hash. A create that timed out fails the apply, and Terraform taints
// the resource: the next apply replaces it, destroying the old object (Delete, which
// records its build here) before creating the new one (Create, which takes the build of
// the same template and spec hash and waits for it instead of building the same inputs
// again). Its plan warns that it will (Read records the build). With
// create_before_destroy the create comes first and builds again.
type leftRunningBuilds struct {
	mu sync.Mutex
	m  map[string]string
}

func newLeftRunningBuilds() *leftRunningBuilds {
	return &leftRunningBuilds{m: map[string]string{}}
}

func leftRunningKey(templateID, specHash string) string { return templateID + "/" + specHash }

// record notes that buildID of templateID, with spec hash specHash, is still running.
func (l *leftRunningBuilds) record(templateID, specHash, buildID string) {
	if specHash == "" {
		return // a state from before spec_hash existed: nothing to match it by
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[leftRunningKey(templateID, specHash)] = buildID
}

// peek returns the build left running of templateID with spec hash specHash, or "".
func (l *leftRunningBuilds) peek(templateID, specHash string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[leftRunningKey(templateID, specHash)]
}

// take returns the build left running of templateID with spec hash specHash, or "", and
// forgets it: one create adopts it.
func (l *leftRunningBuilds) take(templateID, specHash string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := leftRunningKey(templateID, specHash)
	buildID := l.m[key]
	delete(l.m, key)
	return buildID
}
