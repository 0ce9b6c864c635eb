//go:build linux

// Command seccompgen writes the seccomp profile of the local server's
// containers (internal/localserver/engine/docker/seccomp.json): Docker's current
// default profile, from github.com/moby/profiles/seccomp at the version
// tools/go.mod pins, without io_uring. The engine passes it to every
// container it creates, so that an older engine's default (Docker 20.10's
// allows io_uring) cannot widen what a container may call.
//
// The default profile's rules depend on the kernel only through minKernel
// conditions, which the engine evaluates, so the output is the same on
// every Linux machine.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/moby/profiles/seccomp"
)

func main() {
	out := flag.String("o", "seccomp.json", "file to write")
	flag.Parse()
	if err := write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "seccompgen:", err)
		os.Exit(1)
	}
}

func write(path string) error {
	p := seccomp.DefaultProfile()
	// io_uring does its work in kernel threads that seccomp never sees and
	// lies behind many of the kernel's recent local privilege escalations;
	// Docker's default refuses it since 25.0. Dropped here by name so that a
	// default that allowed it again would not pass it on.
	rules := p.Syscalls[:0]
	for _, rule := range p.Syscalls {
		rule.Names = slices.DeleteFunc(rule.Names, func(name string) bool { return strings.HasPrefix(name, "io_uring") })
		if len(rule.Names) == 0 {
			continue
		}
		rules = append(rules, rule)
	}
	p.Syscalls = rules
	raw, err := json.MarshalIndent(p, "", "\t")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(raw, '\n'), 0o644) //nolint:gosec // a source file of the repository
}
