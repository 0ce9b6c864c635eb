package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/system"
	docker "github.com/docker/docker/client"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
)

// offeredRuntime is what chooseRuntime knows of one runtime of the engine.
type offeredRuntime struct {
	gvisor bool
	// allowSuid: a gVisor runtime registered with --allow-suid.
	allowSuid bool
}

// runtimeChoice is chooseRuntime's answer: the runtime and, when auto fell
// back to the engine's default, why (the server warns with it).
type runtimeChoice struct {
	engine.Runtime
	fallback string
}

// isGVisor recognises gVisor's runsc among the engine's runtimes by its
// name, its binary (a runc-compatible runtime registered by path) or its
// containerd shim (io.containerd.runsc.v1).
func isGVisor(name string, rt system.Runtime) bool {
	return name == "runsc" || path.Base(rt.Path) == "runsc" || strings.Contains(rt.Type, "runsc")
}

// offeredRuntimes turns docker info's runtimes into what chooseRuntime
// needs.
func offeredRuntimes(runtimes map[string]system.RuntimeWithStatus) map[string]offeredRuntime {
	out := make(map[string]offeredRuntime, len(runtimes))
	for name, rt := range runtimes {
		gvisor := isGVisor(name, rt.Runtime)
		out[name] = offeredRuntime{gvisor: gvisor, allowSuid: gvisor && flagSet(rt.Args, "allow-suid")}
	}
	return out
}

// flagSet tells whether args set the boolean flag name (-name, --name,
// --name=true).
func flagSet(args []string, name string) bool {
	set := false
	for _, arg := range args {
		flag, value, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if flag == name && arg != flag {
			set = !hasValue || value == "true" || value == "1"
		}
	}
	return set
}

// chooseRuntime picks the runtime for requested ("" or RuntimeAuto or a
// runtime's name) among the engine's offered runtimes. selfTest starts a
// container under a runtime and waits for envd to answer through the
// server's channel; it runs for every runtime chosen but an engine default
// other than gVisor, which every container of the engine already relies on
// (gVisor's is tested for its seccomp flag).
//
//   - "": the engine's default, as before runtimes could be chosen.
//   - auto: a gVisor runtime that passes the self-test (the default when it
//     is one; else "runsc" before others, then by name), else the default,
//     with the reason in fallback.
//   - a name: that runtime; one the engine lacks or that fails its
//     self-test is an error naming it, never a fallback.
func chooseRuntime(ctx context.Context, requested, defaultName string, offered map[string]offeredRuntime, selfTest func(ctx context.Context, name string) error) (runtimeChoice, error) {
	named := func(name string) engine.Runtime {
		return engine.Runtime{Name: name, GVisor: offered[name].gvisor, AllowSuid: offered[name].allowSuid}
	}
	test := func(name string) error {
		if name == defaultName && !offered[name].gvisor {
			return nil
		}
		return selfTest(ctx, name)
	}
	switch requested {
	case "":
		return runtimeChoice{Runtime: named(defaultName)}, nil
	case engine.RuntimeAuto:
		candidates := gvisorRuntimes(defaultName, offered)
		if len(candidates) == 0 {
			return runtimeChoice{Runtime: named(defaultName), fallback: fmt.Sprintf("the Docker engine offers no gVisor runtime (runsc; it offers %s)", offeredList(offered))}, nil
		}
		var failures []string
		for _, name := range candidates {
			err := test(name)
			if err == nil {
				return runtimeChoice{Runtime: named(name)}, nil
			}
			if ctx.Err() != nil {
				return runtimeChoice{}, ctx.Err()
			}
			failures = append(failures, fmt.Sprintf("gVisor runtime %s failed its self-test: %v", name, err))
		}
		return runtimeChoice{Runtime: named(defaultName), fallback: strings.Join(failures, "; ")}, nil
	}
	if _, ok := offered[requested]; !ok {
		return runtimeChoice{}, fmt.Errorf("runtime %q: the Docker engine offers no runtime of that name (it offers %s); register it in the engine's daemon.json (docs/guides/sandbox-security.md) or use --runtime auto", requested, offeredList(offered))
	}
	if err := test(requested); err != nil {
		return runtimeChoice{}, fmt.Errorf("runtime %q failed its self-test (a container of envd that answers through the server's channel): %w", requested, err)
	}
	return runtimeChoice{Runtime: named(requested)}, nil
}

// gvisorRuntimes lists the offered gVisor runtimes in the order auto tries
// them: the engine's default, then "runsc", then by name.
func gvisorRuntimes(defaultName string, offered map[string]offeredRuntime) []string {
	var names []string
	for _, name := range slices.Sorted(maps.Keys(offered)) {
		if offered[name].gvisor {
			names = append(names, name)
		}
	}
	rank := func(name string) int {
		switch name {
		case defaultName:
			return 0
		case "runsc":
			return 1
		}
		return 2
	}
	slices.SortStableFunc(names, func(a, b string) int { return rank(a) - rank(b) })
	return names
}

func offeredList(offered map[string]offeredRuntime) string {
	if len(offered) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(offered)), ", ")
}

// kindSelfTest marks the container of a runtime's self-test (the next
// start's RemoveOrphans removes one a crash left).
const kindSelfTest = "selftest"

// selfTestRuntime starts a container of the envd image under the runtime
// name, waits for envd's health through the container's channel (what
// every sandbox and build needs), warns when the seccomp profile does not
// bind its processes, and removes it.
func (d *Docker) selfTestRuntime(ctx context.Context, name string) error {
	holderID, _, err := d.envd.ForEngine(ctx)
	if err != nil {
		return err
	}
	holder, err := d.cli.ContainerInspect(ctx, holderID)
	if err != nil {
		return fmt.Errorf("inspect the envd volume's holder: %w", err)
	}
	rc, err := d.startContainer(ctx, containerRequest{
		image:   holder.Config.Image,
		kind:    kindSelfTest,
		id:      name,
		labels:  d.labels.of(kindSelfTest, "", "", ""),
		runtime: name,
	}, nil)
	if err != nil {
		return err
	}
	mode, err := seccompMode(ctx, rc)
	d.discard(ctx, rc)
	if err != nil {
		return fmt.Errorf("read the seccomp mode of a container's process: %w", err)
	}
	if warning := seccompWarning(name, mode); warning != "" {
		d.log.Warn(warning, "runtime", name)
	}
	return nil
}

// keepTmp puts envd.TmpKeepFile in the container's /tmp before a start
// under gVisor, so that /tmp stays part of the container's file system as
// under runc (envd removes it as it starts). An image without /tmp is left
// as it is.
func keepTmp(ctx context.Context, cli *docker.Client, runtime engine.Runtime, containerID string) error {
	if !runtime.GVisor {
		return nil
	}
	if st, err := cli.ContainerStatPath(ctx, containerID, path.Dir(envd.TmpKeepFile)); err != nil || !st.Mode.IsDir() {
		return nil //nolint:nilerr // no /tmp: nothing of it to keep
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path.Base(envd.TmpKeepFile), Mode: 0o400}); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := cli.CopyToContainer(ctx, containerID, path.Dir(envd.TmpKeepFile), &buf, container.CopyToContainerOptions{}); err != nil {
		return fmt.Errorf("keep /tmp in the container's files under gVisor: %w", err)
	}
	return nil
}
