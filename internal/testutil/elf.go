package testutil

import (
	"debug/elf"
	"encoding/binary"
	"os"
	"testing"
)

// WriteELF writes the header of a Linux executable for machine at path:
// enough for whatever reads an executable's architecture, nothing to run.
func WriteELF(t *testing.T, path string, machine elf.Machine) {
	t.Helper()
	h := make([]byte, 64)
	copy(h, elf.ELFMAG)
	h[elf.EI_CLASS], h[elf.EI_DATA], h[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	binary.LittleEndian.PutUint16(h[16:], uint16(elf.ET_EXEC))
	binary.LittleEndian.PutUint16(h[18:], uint16(machine))
	binary.LittleEndian.PutUint32(h[20:], uint32(elf.EV_CURRENT))
	binary.LittleEndian.PutUint16(h[52:], 64) // e_ehsize

	if err := os.WriteFile(path, h, 0o755); err != nil { //nolint:gosec // an executable's mode: what reads it takes it for one
		t.Fatal(err)
	}
}
