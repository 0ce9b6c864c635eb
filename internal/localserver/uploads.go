package localserver

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/buildcontext"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// uploadPath prefixes the upload URLs; the grant token follows it. It is
// outside the E2B API and needs no API key: the token is the credential.
const uploadPath = "/_local/uploads/"

// handleFileLink answers GET /templates/{id}/files/{hash} with whether the
// archive is stored and, always (as E2B does), a single-use upload URL.
func (s *Server) handleFileLink(w http.ResponseWriter, r *http.Request, templateID, hash string) error {
	if e2b.ValidateFilesHash(hash) != nil {
		return failure.New(failure.Invalid, "Invalid files hash")
	}
	t, err := s.store.TemplateByID(templateID)
	if err != nil {
		return err
	}
	_, present, err := s.store.ArchivePath(hash)
	if err != nil {
		return failure.OwnFailure(err)
	}
	grant, err := s.store.CreateGrant(t.ID, hash, s.cfg.UploadURLTTL)
	if err != nil {
		return failure.OwnFailure(err)
	}
	base := s.cfg.PublicURL
	if base == "" {
		base = "http://" + r.Host
	}
	writeJSON(w, http.StatusCreated, e2b.TemplateBuildFileUpload{
		Present: present,
		URL:     strings.TrimSuffix(base, "/") + uploadPath + grant.Token,
	})
	return nil
}

// handleUpload receives an archive: spooled to a temporary file within the
// size limit, checked, then published under its hash by a hard link, so a
// stored archive is never replaced (first write wins). The hash is the one
// the client claimed, as on E2B, which does not verify it either. Any
// failure leaves the grant usable for a retry; success spends it, and a
// repeated PUT on the spent grant succeeds (see repeatedUpload).
func (s *Server) handleUpload(w http.ResponseWriter, r *http.Request, token string) error {
	if r.Method != http.MethodPut {
		return failure.New(failure.WrongMethod, "uploads use PUT")
	}
	// Archives may be large and slow: a deadline of their own, not the one
	// of API bodies.
	boundBody(w, r, uploadReadTimeout)
	grant, err := s.store.Grant(token)
	if err != nil {
		return err
	}
	if grant.UsedAt != nil {
		return s.repeatedUpload(w, r, grant)
	}
	if r.ContentLength > s.cfg.MaxUploadBytes {
		return failure.New(failure.TooLarge, "archive of %d bytes is larger than the limit of %d bytes", r.ContentLength, s.cfg.MaxUploadBytes)
	}
	spool, err := os.CreateTemp(s.spoolDir, grant.Hash+"-*.part")
	if err != nil {
		return s.storageError(err)
	}
	defer os.Remove(spool.Name())
	// The writer's failures are the server's (a full disk), the body's the
	// client's: they get different answers.
	sw := &spoolWriter{f: spool, write: s.cfg.writeSpool}
	if sw.write == nil {
		sw.write = (*os.File).Write
	}
	_, err = io.Copy(sw, http.MaxBytesReader(w, r.Body, s.cfg.MaxUploadBytes))
	if err == nil {
		if err = spool.Sync(); err != nil { // on disk before the state says it is stored
			sw.err = err
		}
	}
	if closeErr := spool.Close(); err == nil && closeErr != nil {
		err, sw.err = closeErr, closeErr
	}
	var tooLarge *http.MaxBytesError
	switch {
	case sw.err != nil:
		return s.storageError(fmt.Errorf("spool archive: %w", sw.err))
	case errors.As(err, &tooLarge):
		return failure.New(failure.TooLarge, "archive is larger than the limit of %d bytes", s.cfg.MaxUploadBytes)
	case err != nil:
		return failure.New(failure.Invalid, "receive archive: %v", err)
	}
	if err := s.checkArchiveFile(spool.Name()); errors.Is(err, buildcontext.ErrUnsafeArchive) {
		return failure.New(failure.Invalid, "%v", err)
	} else if err != nil {
		return s.storageError(fmt.Errorf("read the spooled archive: %w", err))
	}
	final := filepath.Join(s.archiveDir, grant.Hash+".tar")
	if err := os.Link(spool.Name(), final); err != nil && !errors.Is(err, os.ErrExist) {
		return s.storageError(fmt.Errorf("publish archive %s: %w", final, err))
	}
	if err := syncDir(s.archiveDir); err != nil {
		return s.storageError(err)
	}
	if _, err := s.store.CommitUpload(token, final); err != nil {
		return s.storageError(err)
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// repeatedUpload answers a PUT on a spent grant: E2B's presigned URLs can be
// retried, so a client whose answer to the first PUT was lost is told the
// upload succeeded when the archive of the grant's hash is stored. The body
// is read (within the limit) and dropped; the first write won.
func (s *Server) repeatedUpload(w http.ResponseWriter, r *http.Request, grant store.Grant) error {
	if _, present, err := s.store.ArchivePath(grant.Hash); err != nil {
		return failure.OwnFailure(err)
	} else if !present {
		return store.ErrGrant()
	}
	_, _ = io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, s.cfg.MaxUploadBytes))
	w.WriteHeader(http.StatusOK)
	return nil
}

// spoolWriter remembers its file's write failure.
type spoolWriter struct {
	f     *os.File
	write func(f *os.File, p []byte) (int, error)
	err   error
}

func (w *spoolWriter) Write(p []byte) (int, error) {
	n, err := w.write(w.f, p)
	if err != nil {
		w.err = err
	}
	return n, err
}

// storageError is the answer to a failure to store on the server's disk:
// 507 when the disk (or quota) is full, naming it, else err as it is (a
// store error by its kind, anything else 500). A full disk is not the
// client's fault, so a retry later may succeed.
func (s *Server) storageError(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		s.log.Error("no space left to store an upload", "err", err)
		return failure.New(failure.NoSpace, "no space left on the server's disk to store the archive; free some and retry")
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// checkArchiveFile checks the spooled archive within the configured limits.
func (s *Server) checkArchiveFile(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = buildcontext.CheckArchive(f, buildcontext.ArchiveLimits{
		MaxUnpackedBytes: s.cfg.MaxUnpackedBytes,
		MaxEntries:       s.cfg.MaxArchiveEntries,
	})
	return err
}

// grantPruneInterval is how often expired upload grants are pruned (link
// requests and the start prune them too).
const grantPruneInterval = time.Minute

// pruneGrantsLoop prunes expired upload grants until the server closes.
func (s *Server) pruneGrantsLoop() {
	ticker := time.NewTicker(grantPruneInterval)
	defer ticker.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-ticker.C:
			if _, err := s.store.PruneGrants(); err != nil {
				s.log.Error("prune expired upload grants", "err", err)
			}
		}
	}
}
