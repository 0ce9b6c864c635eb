package templatebuild

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// specVersion names the encoding of the spec hash (design/hashing.md "Spec hash"). A change to
// what a field means, or to the encoding, needs a new version; a new field does not.
const specVersion = "e2b-spec-v1"

// SpecTagPrefix starts the tag of a reusable build; the first 16 hex digits of its spec
// hash follow.
const SpecTagPrefix = "spec-"

// specField is one named part of what defines a build, with its values in order.
type specField struct {
	name   string
	values []string
}

// specFields lists what defines the build b: its base, every step with its files hash,
// the start and ready commands, the resources and the triggers. Credentials, tags, force
// and the paths the files came from do not change what is built and are left out. A
// field with no values is left out of the hash, so that a field added later leaves the
// hashes of builds without it as they were.
func (b *Build) specFields() []specField {
	fields := []specField{
		{"from_image", nonEmpty(b.Start.FromImage)},
		{"from_template", nonEmpty(b.Start.FromTemplate)},
	}
	for _, s := range b.Start.Steps {
		fields = append(fields, specField{"step", append([]string{s.Type, s.FilesHash}, s.Args...)})
	}
	fields = append(fields,
		specField{"start_cmd", nonEmpty(b.Start.StartCmd)},
		specField{"ready_cmd", nonEmpty(b.Start.ReadyCmd)},
		specField{"cpu_count", optionalInt(b.CPUCount)},
		specField{"memory_mb", optionalInt(b.MemoryMB)},
	)
	for _, k := range slices.Sorted(maps.Keys(b.triggers)) {
		fields = append(fields, specField{"trigger", []string{k, b.triggers[k]}})
	}
	return fields
}

// specHash is the spec hash v1 of fields: sha256 over the version and, for each field
// with values, its name, the number of values and the values, each written as
// netstring-like ns(x) = len(x) ":" x ",".
func specHash(fields []specField) string {
	h := sha256.New()
	ns := func(s string) { fmt.Fprintf(h, "%d:%s,", len(s), s) }
	ns(specVersion)
	for _, f := range fields {
		if len(f.values) == 0 {
			continue
		}
		ns(f.name)
		ns(strconv.Itoa(len(f.values)))
		for _, v := range f.values {
			ns(v)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

func optionalInt(v *int32) []string {
	if v == nil {
		return nil
	}
	return []string{strconv.Itoa(int(*v))}
}

// SpecTag is the tag a reusable build with spec hash specHash carries.
func SpecTag(specHash string) string { return SpecTagPrefix + specHash[:16] }
