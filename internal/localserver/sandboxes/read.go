package sandboxes

import (
	"slices"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// stateAndEnd is the API's state of the sandbox and its endAt, which for a
// paused sandbox is when it was paused, as on E2B.
func stateAndEnd(sb store.Sandbox) (string, time.Time) {
	switch {
	case !sb.Paused():
		return store.StateRunning, sb.EndAt
	case sb.PausedAt != nil:
		return store.StatePaused, *sb.PausedAt
	default:
		return store.StatePaused, sb.EndAt
	}
}

func listed(sb store.Sandbox) e2b.ListedSandbox {
	state, end := stateAndEnd(sb)
	return e2b.ListedSandbox{
		TemplateID: sb.TemplateID, Alias: sb.Alias, SandboxID: sb.ID, ClientID: e2b.ClientID,
		StartedAt: sb.StartedAt, EndAt: end, CPUCount: sb.CPUCount, MemoryMB: sb.MemoryMB,
		Metadata: sb.Metadata, State: state, EnvdVersion: sb.EnvdVersion,
	}
}

// List lists the live sandboxes whose metadata has every key and value of
// metadata and whose state is among states.
func (s *Manager) List(metadata map[string]string, states []string) ([]e2b.ListedSandbox, error) {
	all, err := s.records.LiveSandboxes()
	if err != nil {
		return nil, failure.OwnFailure(err)
	}
	out := []e2b.ListedSandbox{}
next:
	for _, sb := range all {
		if sb.Starting() {
			continue
		}
		for k, v := range metadata {
			if sb.Metadata[k] != v {
				continue next
			}
		}
		item := listed(sb)
		if slices.Contains(states, item.State) {
			out = append(out, item)
		}
	}
	return out, nil
}

// Get is the sandbox's detail.
func (s *Manager) Get(id string) (e2b.SandboxDetail, error) {
	sb, err := s.records.Sandbox(id)
	if err != nil {
		return e2b.SandboxDetail{}, err
	}
	state, end := stateAndEnd(sb)
	onTimeout := "kill"
	if sb.AutoPause {
		onTimeout = "pause"
	}
	a := s.answer(sb)
	return e2b.SandboxDetail{
		TemplateID: sb.TemplateID, Alias: sb.Alias, SandboxID: sb.ID, ClientID: e2b.ClientID,
		StartedAt: sb.StartedAt, EndAt: end, EnvdVersion: sb.EnvdVersion,
		EnvdAccessToken: sb.AccessToken, Domain: a.Domain,
		CPUCount: sb.CPUCount, MemoryMB: sb.MemoryMB, Metadata: sb.Metadata, State: state,
		Lifecycle: &e2b.SandboxLifecycle{OnTimeout: onTimeout, AutoResume: sb.AutoResume > 0},
	}, nil
}
