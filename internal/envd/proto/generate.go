// Package proto holds envd's protocol definitions; `go generate` rebuilds
// internal/envd/gen from them.
package proto

//go:generate ./generate.sh
