//go:build linux

package server

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// File metadata as envd 0.6.13 keeps it (design/envd.md): the headers
// X-Metadata-<key> of an upload become the extended attributes
// user.e2b.<lower-cased key> of the file, and entries report them back.
const (
	metadataHeaderPrefix = "X-Metadata-"
	metadataXattrPrefix  = "user.e2b."
	// maxMetadataKeyLen is the xattr name limit (255) less the prefix.
	maxMetadataKeyLen = 255 - len(metadataXattrPrefix)
	// maxMetadataTotalLen keeps a file's metadata within one ext4 block.
	maxMetadataTotalLen = 4096
)

// uploadMetadata is the metadata of an upload's X-Metadata-* headers (the
// first value of each), validated as envd does; nil when there is none.
func uploadMetadata(h http.Header) (map[string]string, error) {
	var metadata map[string]string
	total := 0
	for name, values := range h {
		key, ok := strings.CutPrefix(name, metadataHeaderPrefix)
		if !ok || key == "" || len(values) == 0 {
			continue
		}
		key = strings.ToLower(key)
		value := values[0]
		if len(key) > maxMetadataKeyLen {
			return nil, fmt.Errorf("metadata key %q exceeds %d bytes", key, maxMetadataKeyLen)
		}
		if err := printableASCII("key", key); err != nil {
			return nil, err
		}
		if err := printableASCII(fmt.Sprintf("value for key %q", key), value); err != nil {
			return nil, err
		}
		total += len(metadataXattrPrefix) + len(key) + len(value)
		if metadata == nil {
			metadata = map[string]string{}
		}
		metadata[key] = value
	}
	if total > maxMetadataTotalLen {
		return nil, fmt.Errorf("total metadata size %d exceeds %d bytes", total, maxMetadataTotalLen)
	}
	return metadata, nil
}

func printableASCII(label, s string) error {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("metadata %s contains non-printable-ASCII byte 0x%02x at offset %d", label, c, i)
		}
	}
	return nil
}

// writeMetadata stores metadata on the open file f. A filesystem without
// extended attributes (procfs, sysfs) keeps none, as on envd.
func writeMetadata(f *os.File, metadata map[string]string) error {
	for key, value := range metadata {
		err := unix.Fsetxattr(int(f.Fd()), metadataXattrPrefix+key, []byte(value), 0)
		switch {
		case err == nil:
		case xattrUnsupported(err):
			return nil
		case isNoSpace(err):
			return &httpError{http.StatusInsufficientStorage, fmt.Sprintf("not enough space for file metadata: %v", err)}
		default:
			return fmt.Errorf("error writing file metadata: %w", err)
		}
	}
	return nil
}

// readMetadata is the metadata stored on path (symlinks followed), best
// effort: nil when there is none or it cannot be read; attributes that are
// not UTF-8 (set inside the sandbox by other means) are left out.
func readMetadata(path string) map[string]string {
	names, err := xattrList(path)
	if err != nil {
		return nil
	}
	var metadata map[string]string
	for _, name := range names {
		key, ok := strings.CutPrefix(name, metadataXattrPrefix)
		if !ok {
			continue
		}
		value, err := xattrGet(path, name)
		if err != nil || !utf8.ValidString(key) || !utf8.Valid(value) {
			continue
		}
		if metadata == nil {
			metadata = map[string]string{}
		}
		metadata[key] = string(value)
	}
	return metadata
}

func xattrList(path string) ([]string, error) {
	for {
		size, err := unix.Listxattr(path, nil)
		if err != nil || size == 0 {
			return nil, err
		}
		buf := make([]byte, size)
		n, err := unix.Listxattr(path, buf)
		if errors.Is(err, syscall.ERANGE) {
			continue // grew meanwhile
		}
		if err != nil {
			return nil, err
		}
		return strings.FieldsFunc(string(buf[:n]), func(r rune) bool { return r == 0 }), nil
	}
}

func xattrGet(path, name string) ([]byte, error) {
	for {
		size, err := unix.Getxattr(path, name, nil)
		if err != nil {
			return nil, err
		}
		buf := make([]byte, size)
		n, err := unix.Getxattr(path, name, buf)
		if errors.Is(err, syscall.ERANGE) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

func xattrUnsupported(err error) bool {
	return errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP)
}
