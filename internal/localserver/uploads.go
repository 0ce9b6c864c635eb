package localserver

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

// uploadPath prefixes the upload URLs; the grant token follows it. It is
// outside the E2B API and needs no API key: the token is the credential.
const uploadPath = "/_local/uploads/"

// handleFileLink answers GET /templates/{id}/files/{hash} with whether the
// archive is stored and, always (as E2B does), a single-use upload URL.
func (s *Server) handleFileLink(w http.ResponseWriter, r *http.Request, templateID, hash string) {
	if e2bapi.ValidateFilesHash(hash) != nil {
		writeError(w, http.StatusBadRequest, "Invalid files hash")
		return
	}
	t, err := s.store.TemplateByID(templateID)
	if err != nil {
		s.storeError(w, err)
		return
	}
	_, present, err := s.store.ArchivePath(hash)
	if err != nil {
		s.internalError(w, err)
		return
	}
	grant, err := s.store.CreateGrant(t.ID, hash, s.cfg.UploadURLTTL)
	if err != nil {
		s.internalError(w, err)
		return
	}
	base := s.cfg.PublicURL
	if base == "" {
		base = "http://" + r.Host
	}
	writeJSON(w, http.StatusCreated, e2bapi.TemplateBuildFileUpload{
		Present: present,
		URL:     strings.TrimSuffix(base, "/") + uploadPath + grant.Token,
	})
}

// handleUpload receives an archive: spooled to a temporary file within the
// size limit, checked, then published under its hash by a hard link, so a
// stored archive is never replaced (first write wins). The hash is the one
// the client claimed, as on E2B, which does not verify it either. Any
// failure leaves the grant usable for a retry; success consumes it.
func (s *Server) handleUpload(w http.ResponseWriter, r *http.Request, token string) {
	if r.Method != http.MethodPut {
		writeError(w, http.StatusMethodNotAllowed, "uploads use PUT")
		return
	}
	grant, err := s.store.Grant(token)
	if err != nil {
		s.storeError(w, err)
		return
	}
	if r.ContentLength > s.cfg.MaxUploadBytes {
		writeError(w, http.StatusRequestEntityTooLarge, "archive of %d bytes is larger than the limit of %d bytes", r.ContentLength, s.cfg.MaxUploadBytes)
		return
	}
	spool, err := os.CreateTemp(s.spoolDir, grant.Hash+"-*.part")
	if err != nil {
		s.internalError(w, err)
		return
	}
	defer os.Remove(spool.Name())
	_, err = io.Copy(spool, http.MaxBytesReader(w, r.Body, s.cfg.MaxUploadBytes))
	if err == nil {
		err = spool.Sync() // on disk before the state says it is stored
	}
	if closeErr := spool.Close(); err == nil {
		err = closeErr
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, "archive is larger than the limit of %d bytes", s.cfg.MaxUploadBytes)
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, "receive archive: %v", err)
		return
	}
	if err := s.checkArchiveFile(spool.Name()); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	final := filepath.Join(s.archiveDir, grant.Hash+".tar")
	if err := os.Link(spool.Name(), final); err != nil && !errors.Is(err, os.ErrExist) {
		s.internalError(w, fmt.Errorf("publish archive %s: %w", final, err))
		return
	}
	if err := syncDir(s.archiveDir); err != nil {
		s.internalError(w, err)
		return
	}
	if _, err := s.store.CommitUpload(token, final); err != nil {
		s.storeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (s *Server) checkArchiveFile(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return checkArchive(f, s.cfg.MaxUnpackedBytes, s.cfg.MaxArchiveEntries)
}

// errUnpackedTooLarge ends reading when the unpacked archive passes its limit.
var errUnpackedTooLarge = errors.New("unpacked size limit reached")

type limitReader struct {
	r    io.Reader
	left int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, errUnpackedTooLarge
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// checkArchive reads a gzip'd or plain tar to its end within the limits and
// rejects, naming the entry, anything that could land outside the directory
// it is extracted into: absolute names, ".." components, entries below a
// symlink of the archive, symlinks to absolute paths or out of the root,
// hard links to such names, and entries other than files, directories and
// links. Nothing is extracted here.
func checkArchive(r io.Reader, maxUnpacked int64, maxEntries int) error {
	br := bufio.NewReader(r)
	var stream io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("archive is not valid gzip: %w", err)
		}
		defer zr.Close()
		stream = zr
	}
	tr := tar.NewReader(&limitReader{r: stream, left: maxUnpacked})
	symlinks := map[string]bool{}
	for entries := 0; ; entries++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if entries == 0 {
				return errors.New("archive is not a tar: it has no entries")
			}
			return nil
		}
		if errors.Is(err, errUnpackedTooLarge) {
			return fmt.Errorf("archive unpacks to more than the limit of %d bytes", maxUnpacked)
		}
		if err != nil {
			return fmt.Errorf("archive is not a valid tar: %w", err)
		}
		if entries >= maxEntries {
			return fmt.Errorf("archive has more than the limit of %d entries", maxEntries)
		}
		if err := checkEntry(hdr, symlinks); err != nil {
			return fmt.Errorf("archive entry %q: %w", hdr.Name, err)
		}
		// Read the content through the limit (Next would skip it unread).
		if _, err := io.Copy(io.Discard, tr); err != nil {
			if errors.Is(err, errUnpackedTooLarge) {
				return fmt.Errorf("archive unpacks to more than the limit of %d bytes", maxUnpacked)
			}
			return fmt.Errorf("archive entry %q: %w", hdr.Name, err)
		}
	}
}

func checkEntry(hdr *tar.Header, symlinks map[string]bool) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil // metadata only; tar writes nothing for it
	}
	name, err := entryName(hdr.Name)
	if err != nil {
		return err
	}
	for dir := path.Dir(name); dir != "." && dir != "/"; dir = path.Dir(dir) {
		if symlinks[dir] {
			return fmt.Errorf("lies below the symlink %q", dir)
		}
	}
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeDir:
	case tar.TypeSymlink:
		if path.IsAbs(hdr.Linkname) {
			return fmt.Errorf("symlink to the absolute path %q leaves the archive", hdr.Linkname)
		}
		if escapesRoot(path.Join(path.Dir(name), hdr.Linkname)) {
			return fmt.Errorf("symlink to %q leaves the archive", hdr.Linkname)
		}
		symlinks[name] = true
	case tar.TypeLink:
		if _, err := entryName(hdr.Linkname); err != nil {
			return fmt.Errorf("hard link to %q: %w", hdr.Linkname, err)
		}
	default:
		return fmt.Errorf("unsupported entry type %q", string(hdr.Typeflag))
	}
	return nil
}

// entryName checks an entry name and returns it cleaned.
func entryName(name string) (string, error) {
	if name == "" {
		return "", errors.New("empty name")
	}
	if strings.HasPrefix(name, "/") {
		return "", errors.New("absolute name")
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", errors.New(`name contains ".."`)
		}
	}
	return path.Clean(name), nil
}

func escapesRoot(p string) bool { return p == ".." || strings.HasPrefix(p, "../") }
