package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// The layer cache (design/local-server.md, "Layer cache"): every phase of a
// build (the default user, each step) is committed as a layer image of its
// key (Engine.LayerRef), and the next phase goes on from it. The key chains the previous key with
// what the phase does, as E2B's hashKeys do, so a rebuild whose first
// phases are unchanged starts from the image of the last of them.

// layerCacheVersion changes when what a phase does for the same inputs
// changes (the helper scripts are hashed on their own), so that images of
// older servers are not reused.
const layerCacheVersion = "1"

// hashKeys is E2B's cache key: sha256 of base and the keys, each after a ";".
func hashKeys(base string, keys ...string) string {
	h := sha256.New()
	h.Write([]byte(base))
	for _, k := range keys {
		h.Write([]byte(";"))
		h.Write([]byte(k))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// baseKey is the key of the image a build starts from. It names the image
// by ID, so a base retagged or pulled anew is a different base, and holds
// the engine's cache scope (the server's instance), so servers sharing an
// engine keep caches apart.
func baseKey(scope, imageID string) string {
	return hashKeys(layerCacheVersion, scope, ensureUserScript, mkdirOwnedScript, placeScript, "image:"+imageID)
}

// stepKey chains a step onto the key before it. The arguments go in as
// JSON, not joined with spaces as on E2B: ["echo a b"] and ["echo a", "b"]
// (the same command as user b) must not share a key.
func stepKey(prev string, st e2b.TemplateStep) string {
	args, _ := json.Marshal(st.Args) // a []string always marshals
	return hashKeys(prev, st.Type, string(args), st.FilesHash)
}

// defaultUserKey is the key of the implicit `USER user true` phase.
func defaultUserKey(base string) string {
	return hashKeys(base, "DEFAULT USER", defaultUser)
}

// layerState is what a phase leaves for the next besides its files; each
// layer image carries it in a label.
type layerState struct {
	User    string            `json:"user"`
	Workdir string            `json:"workdir"`
	Env     map[string]string `json:"env"`
	// Shell is how commands run, chosen once per chain (a RUN that installs
	// bash does not change it, in a fresh build or a cached one).
	Shell string `json:"shell,omitempty"`
	Login bool   `json:"login,omitempty"`
}

// cachedLayer returns the state of the cached layer of key, when the
// engine has one with a state this build can go on from.
func (b *builder) cachedLayer(ctx context.Context, key string) (layerState, bool, error) {
	var st layerState
	raw, ok, err := b.eng.Layer(ctx, key)
	if err != nil || !ok {
		return st, false, err
	}
	if err := json.Unmarshal(raw, &st); err != nil || st.User == "" {
		return st, false, nil //nolint:nilerr // a layer with a bad state is not a cache hit
	}
	return st, true, nil
}

// commitLayer commits the phase's container as the layer of key, with
// what the next phase inherits.
func (b *builder) commitLayer(ctx context.Context, key string) error {
	state, err := json.Marshal(layerState{User: b.user, Workdir: b.workdir, Env: b.env, Shell: b.sh.Path, Login: b.sh.Login})
	if err != nil {
		return err
	}
	grown, err := b.c.CommitLayer(ctx, key, state)
	if err != nil {
		return err
	}
	if grown > restartAfter {
		b.endPhase(ctx) // the next phase starts from this layer
	}
	return nil
}

// restartAfter is how far a build container's changes may grow before the
// next phase gets a fresh container from the last layer: a commit holds
// everything the container changed since it started, so small phases
// share a container (a commit and no start each) while a large one is
// committed once.
const restartAfter = 64 << 20
