package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/e2b-terraform/terraform-provider-e2b/"

// layerRules are the import rules of DESIGN.md: a package whose path starts with the key
// may not import, outside its tests, a package whose path starts with one of the values.
var layerRules = map[string][]string{
	// Use cases: plain Go, no Terraform, no server.
	"internal/templatebuild": {"internal/provider", "internal/localserver", "internal/sandboxrun"},
	"internal/sandboxrun":    {"internal/provider", "internal/localserver", "internal/templatebuild"},
	// Clients: libraries only.
	"internal/e2bapi":       {"internal/provider", "internal/localserver", "internal/templatebuild", "internal/sandboxrun", "internal/envd", "internal/buildcontext", "internal/dockerfile"},
	"internal/envd":         {"internal/provider", "internal/localserver", "internal/templatebuild", "internal/sandboxrun"},
	"internal/envd/client":  {"internal/provider", "internal/localserver", "internal/templatebuild", "internal/sandboxrun", "internal/envd/server", "internal/buildcontext", "internal/dockerfile"},
	"internal/localserver":  {"internal/provider", "internal/templatebuild", "internal/sandboxrun"},
	"internal/buildcontext": {"internal/"},
	"internal/safehttp":     {"internal/"},
	"internal/steps":        {"internal/"},
	"internal/dockerfile":   {"internal/"},
}

// leafRules are packages that may import nothing of the module: unlike
// layerRules they do not cover the packages below them.
var leafRules = []string{"internal/envd"}

// layerExceptions are imports a rule's prefix would catch that the layers allow.
var layerExceptions = map[string][]string{
	"internal/dockerfile":   {"internal/steps"},
	"internal/buildcontext": {"internal/buildcontext", "internal/buildcontext/"},
}

// TestLayers checks the import rules of DESIGN.md on the non-test files of every package,
// and that nothing but the command imports the provider.
func TestLayers(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir("internal", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(path))
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			if err != nil || !strings.HasPrefix(imp, module) {
				continue
			}
			imp = strings.TrimPrefix(imp, module)
			if imp == "internal/provider" && pkg != "internal/provider" {
				t.Errorf("%s imports internal/provider: nothing but main.go may", path)
			}
			for _, leaf := range leafRules {
				if pkg == leaf && strings.HasPrefix(imp, "internal/") {
					t.Errorf("%s imports %s: %s imports nothing of the module (DESIGN.md)", path, imp, leaf)
				}
			}
			for layer, banned := range layerRules {
				if pkg != layer && !strings.HasPrefix(pkg, layer+"/") {
					continue
				}
				for _, b := range banned {
					if strings.HasPrefix(imp, b) && !allowed(layer, imp) {
						t.Errorf("%s imports %s, which the %s layer may not (DESIGN.md)", path, imp, layer)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func allowed(layer, imp string) bool {
	for _, ok := range layerExceptions[layer] {
		if imp == ok || (strings.HasSuffix(ok, "/") && strings.HasPrefix(imp, ok)) {
			return true
		}
	}
	return false
}
