package store

import (
	"encoding/json"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Sandbox states: the API's SandboxState (running, paused), and starting,
// the state of a sandbox recorded before its container runs, which the API
// does not show.
const (
	StateStarting = "starting"
	StateRunning  = "running"
	StatePaused   = "paused"
)

// Sandbox is a running or paused sandbox and what the API answers about it.
type Sandbox struct {
	ID          string            `json:"id"`
	TemplateID  string            `json:"templateID"`
	Alias       string            `json:"alias"`
	BuildID     string            `json:"buildID"`
	AccessToken string            `json:"accessToken"`
	StartedAt   time.Time         `json:"startedAt"`
	EndAt       time.Time         `json:"endAt"`
	CPUCount    int32             `json:"cpuCount"`
	MemoryMB    int32             `json:"memoryMB"`
	EnvdVersion string            `json:"envdVersion"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	// EnvVars are the creation's, which a boot of the sandbox again (after
	// an engine restart) hands envd anew.
	EnvVars     map[string]string `json:"envVars,omitempty"`
	ContainerID string            `json:"containerID"`
	// State is StateStarting until its container runs, StatePaused while
	// paused; empty (records before pausing existed) or StateRunning
	// otherwise.
	State    string     `json:"state,omitempty"`
	PausedAt *time.Time `json:"pausedAt,omitempty"`
	// AutoPause pauses the sandbox at its end instead of killing it
	// (lifecycle onTimeout "pause").
	AutoPause bool `json:"autoPause,omitempty"`
	// AutoResume, when set, is how long traffic to the paused sandbox
	// resumes it for (lifecycle autoResume; the creation's timeout, as on
	// E2B).
	AutoResume time.Duration `json:"autoResume,omitempty"`
}

// Paused reports whether the sandbox is paused.
func (sb Sandbox) Paused() bool { return sb.State == StatePaused }

// Starting reports whether the sandbox's container is not running yet: its
// create owns it until then.
func (sb Sandbox) Starting() bool { return sb.State == StateStarting }

// Live reports whether the sandbox still exists at now: a paused one until
// it is killed, one that pauses at its end until it is paused, any other
// until its end.
func (sb Sandbox) Live(now time.Time) bool {
	return sb.Paused() || sb.AutoPause || now.Before(sb.EndAt)
}

// Sandboxes is the records of the sandboxes, their logs and the warm pool's
// containers. It is safe for concurrent use.
type Sandboxes struct {
	db  *bolt.DB
	now func() time.Time
}

// CreateSandbox records a sandbox (starting, as create records it before
// its container runs) and counts the spawn on its template, unless the
// template was deleted meanwhile. A pooled container
// of the same ID, handed out, stops being pooled in the same transaction.
func (s *Sandboxes) CreateSandbox(sb Sandbox) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		if err := countSpawn(tx, sb.TemplateID, sb.StartedAt); err != nil {
			return err
		}
		if err := tx.Bucket(bucketPool).Delete([]byte(sb.ID)); err != nil {
			return err
		}
		return putJSON(tx.Bucket(bucketSandboxes), sb.ID, sb)
	})
}

// Sandbox returns a live sandbox (Sandbox.Live). From its end on a sandbox
// that is not paused is gone (failure.NotFound), as on E2B, although its
// record stays until the reaper has stopped its container.
func (s *Sandboxes) Sandbox(id string) (Sandbox, error) {
	var sb Sandbox
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		sb, err = s.liveSandbox(tx.Bucket(bucketSandboxes), id)
		return err
	})
	return sb, err
}

func (s *Sandboxes) liveSandbox(b *bolt.Bucket, id string) (Sandbox, error) {
	var sb Sandbox
	found, err := getJSON(b, id, &sb)
	if err == nil && (!found || !sb.Live(s.now())) {
		return sb, failure.New(failure.NotFound, "sandbox '%s' not found", id)
	}
	return sb, err
}

// LiveSandboxes lists the live sandboxes (Sandbox.Live), oldest first.
func (s *Sandboxes) LiveSandboxes() ([]Sandbox, error) {
	all, err := s.Sandboxes()
	live := all[:0]
	now := s.now()
	for _, sb := range all {
		if sb.Live(now) {
			live = append(live, sb)
		}
	}
	return live, err
}

// Sandboxes lists every recorded sandbox, expired ones included (for the
// reaper), oldest first.
func (s *Sandboxes) Sandboxes() ([]Sandbox, error) {
	var out []Sandbox
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSandboxes).ForEach(func(_, v []byte) error {
			var sb Sandbox
			if err := json.Unmarshal(v, &sb); err != nil {
				return err
			}
			out = append(out, sb)
			return nil
		})
	})
	sort.Slice(out, func(i, j int) bool {
		if !out[i].StartedAt.Equal(out[j].StartedAt) {
			return out[i].StartedAt.Before(out[j].StartedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, err
}

// DeleteSandbox forgets a sandbox; false when it was not recorded.
func (s *Sandboxes) DeleteSandbox(id string) (bool, error) {
	found := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSandboxes)
		found = b.Get([]byte(id)) != nil
		if err := deleteLog(tx, sandboxLogID(id)); err != nil {
			return err
		}
		return b.Delete([]byte(id))
	})
	return found, err
}

// SetSandboxEndAt moves the expiry of a running sandbox and returns it.
func (s *Sandboxes) SetSandboxEndAt(id string, endAt time.Time) (Sandbox, error) {
	return s.updateSandbox(id, func(sb *Sandbox) error {
		if sb.Paused() {
			return notRunning(id)
		}
		sb.EndAt = endAt.UTC()
		return nil
	})
}

// ExtendSandboxEndAt moves a running sandbox's end to endAt when that is
// later, never earlier, and returns the sandbox.
func (s *Sandboxes) ExtendSandboxEndAt(id string, endAt time.Time) (Sandbox, error) {
	return s.updateSandbox(id, func(sb *Sandbox) error {
		if sb.Paused() {
			return notRunning(id)
		}
		if endAt.After(sb.EndAt) {
			sb.EndAt = endAt.UTC()
		}
		return nil
	})
}

// notRunning is the error for a change only a running sandbox takes: as on
// E2B, a paused sandbox is not found among the running ones.
func notRunning(id string) error {
	return failure.New(failure.NotFound, "sandbox '%s' is paused: connect to it to resume it", id)
}

// SandboxStarted records that a starting sandbox's container runs: its
// container and the envd version it runs. Its end may have passed while it
// started (the reaper ends it then); its create still owns it until now.
func (s *Sandboxes) SandboxStarted(id, containerID, envdVersion string) (Sandbox, error) {
	var sb Sandbox
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSandboxes)
		found, err := getJSON(b, id, &sb)
		switch {
		case err != nil:
			return err
		case !found:
			return failure.New(failure.NotFound, "sandbox '%s' not found", id)
		case !sb.Starting():
			return failure.New(failure.Conflict, "sandbox '%s' is not starting", id)
		}
		sb.State, sb.ContainerID, sb.EnvdVersion = StateRunning, containerID, envdVersion
		return putJSON(b, id, sb)
	})
	return sb, err
}

// PauseSandbox records that a running sandbox was paused (failure.Conflict
// when it already was).
func (s *Sandboxes) PauseSandbox(id string) (Sandbox, error) {
	return s.updateSandbox(id, func(sb *Sandbox) error {
		if sb.Paused() {
			return failure.New(failure.Conflict, "Error pausing sandbox - sandbox '%s' is already paused", id)
		}
		now := s.now().UTC()
		sb.State, sb.PausedAt = StatePaused, &now
		return nil
	})
}

// ResumeSandbox records that a paused sandbox runs again, until endAt, and
// whether it pauses then (unchanged when autoPause is nil).
func (s *Sandboxes) ResumeSandbox(id string, endAt time.Time, autoPause *bool) (Sandbox, error) {
	return s.updateSandbox(id, func(sb *Sandbox) error {
		if !sb.Paused() {
			return failure.New(failure.Conflict, "Sandbox %s is already running", id)
		}
		sb.State, sb.PausedAt, sb.EndAt = StateRunning, nil, endAt.UTC()
		if autoPause != nil {
			sb.AutoPause = *autoPause
		}
		return nil
	})
}

// sandboxesOf counts the recorded sandboxes of a template, in the
// transaction that deletes it.
func sandboxesOf(tx *bolt.Tx, templateID string) (int, error) {
	n := 0
	err := tx.Bucket(bucketSandboxes).ForEach(func(_, v []byte) error {
		var sb Sandbox
		if err := json.Unmarshal(v, &sb); err != nil {
			return err
		}
		if sb.TemplateID == templateID {
			n++
		}
		return nil
	})
	return n, err
}

func (s *Sandboxes) updateSandbox(id string, change func(*Sandbox) error) (Sandbox, error) {
	var sb Sandbox
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSandboxes)
		var err error
		if sb, err = s.liveSandbox(b, id); err != nil {
			return err
		}
		if err := change(&sb); err != nil {
			return err
		}
		return putJSON(b, id, sb)
	})
	return sb, err
}
