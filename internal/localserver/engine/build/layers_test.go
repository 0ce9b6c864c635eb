package build

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

func TestHashKeysIsE2BsFormula(t *testing.T) {
	sum := sha256.Sum256([]byte("base;RUN;x"))
	if got := hashKeys("base", "RUN", "x"); got != hex.EncodeToString(sum[:]) {
		t.Errorf("hashKeys = %s, want sha256 of the keys joined by ';'", got)
	}
	// The same command as another user must not share a key with a
	// command that has the user's name in it.
	a := stepKey("k", e2b.TemplateStep{Type: "RUN", Args: []string{"echo a b"}})
	b := stepKey("k", e2b.TemplateStep{Type: "RUN", Args: []string{"echo a", "b"}})
	if a == b {
		t.Error("RUN [echo a b] and RUN [echo a] as b share a key")
	}
	if stepKey("k", e2b.TemplateStep{Type: "COPY", Args: []string{"a", "/a"}, FilesHash: "1"}) ==
		stepKey("k", e2b.TemplateStep{Type: "COPY", Args: []string{"a", "/a"}, FilesHash: "2"}) {
		t.Error("COPY steps with different files share a key")
	}
	if got, want := layerLine(true, "builder 1/2", "RUN x", "abc"), "CACHED [builder 1/2] RUN x [abc]"; got != want {
		t.Errorf("layerLine = %q, want %q", got, want)
	}
}
