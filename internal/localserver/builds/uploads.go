package builds

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/buildcontext"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// FileLink grants a single-use upload of the archive of hash for the
// template, and says whether that archive is stored already.
func (s *Manager) FileLink(templateID, hash string) (present bool, token string, err error) {
	if e2b.ValidateFilesHash(hash) != nil {
		return false, "", failure.New(failure.Invalid, "Invalid files hash")
	}
	t, err := s.catalog.TemplateByID(templateID)
	if err != nil {
		return false, "", err
	}
	_, present, err = s.uploads.ArchivePath(hash)
	if err != nil {
		return false, "", failure.OwnFailure(err)
	}
	grant, err := s.uploads.CreateGrant(t.ID, hash, s.cfg.UploadURLTTL)
	if err != nil {
		return false, "", failure.OwnFailure(err)
	}
	return present, grant.Token, nil
}

// Upload takes the archive body of the grant token, of size bytes (-1:
// unknown): spooled to a temporary file within the size limit, checked
// (the one check of a COPY archive, with the server's one set of limits),
// then published under its hash by a hard link, so a stored archive is
// never replaced (first write wins). The hash is the one the client
// claimed, as on E2B, which does not verify it either. Any failure leaves
// the grant usable for a retry; success spends it, and a repeated upload on
// the spent grant succeeds (see repeatedUpload).
func (s *Manager) Upload(token string, size int64, body io.Reader) error {
	grant, err := s.uploads.Grant(token)
	if err != nil {
		return err
	}
	if grant.UsedAt != nil {
		return s.repeatedUpload(grant, body)
	}
	if size > s.cfg.MaxUploadBytes {
		return failure.New(failure.TooLarge, "archive of %d bytes is larger than the limit of %d bytes", size, s.cfg.MaxUploadBytes)
	}
	spool, err := os.CreateTemp(s.cfg.SpoolDir, grant.Hash+"-*.part")
	if err != nil {
		return s.storageError(err)
	}
	defer os.Remove(spool.Name())
	// The writer's failures are the server's (a full disk), the body's the
	// client's: they get different answers.
	sw := &spoolWriter{f: spool, write: s.cfg.WriteSpool}
	if sw.write == nil {
		sw.write = (*os.File).Write
	}
	n, err := io.Copy(sw, io.LimitReader(body, s.cfg.MaxUploadBytes+1))
	if err == nil {
		if err = spool.Sync(); err != nil { // on disk before the state says it is stored
			sw.err = err
		}
	}
	if closeErr := spool.Close(); err == nil && closeErr != nil {
		err, sw.err = closeErr, closeErr
	}
	switch {
	case sw.err != nil:
		return s.storageError(fmt.Errorf("spool archive: %w", sw.err))
	case err != nil:
		return failure.New(failure.Invalid, "receive archive: %v", err)
	case n > s.cfg.MaxUploadBytes:
		return failure.New(failure.TooLarge, "archive is larger than the limit of %d bytes", s.cfg.MaxUploadBytes)
	}
	if err := s.checkArchiveFile(spool.Name()); errors.Is(err, buildcontext.ErrUnsafeArchive) {
		return failure.New(failure.Invalid, "%v", err)
	} else if err != nil {
		return s.storageError(fmt.Errorf("read the spooled archive: %w", err))
	}
	final := filepath.Join(s.cfg.ArchiveDir, grant.Hash+".tar")
	if err := os.Link(spool.Name(), final); err != nil && !errors.Is(err, os.ErrExist) {
		return s.storageError(fmt.Errorf("publish archive %s: %w", final, err))
	}
	if err := syncDir(s.cfg.ArchiveDir); err != nil {
		return s.storageError(err)
	}
	if _, err := s.uploads.CommitUpload(token, final); err != nil {
		return s.storageError(err)
	}
	return nil
}

// repeatedUpload answers an upload on a spent grant: E2B's presigned URLs
// can be retried, so a client whose answer to the first upload was lost is
// told it succeeded when the archive of the grant's hash is stored. The
// body is read (within the limit) and dropped; the first write won.
func (s *Manager) repeatedUpload(grant store.Grant, body io.Reader) error {
	if _, present, err := s.uploads.ArchivePath(grant.Hash); err != nil {
		return failure.OwnFailure(err)
	} else if !present {
		return store.ErrGrant()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(body, s.cfg.MaxUploadBytes))
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
func (s *Manager) storageError(err error) error {
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
func (s *Manager) checkArchiveFile(name string) error {
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

// pruneGrantsLoop prunes expired upload grants until the Manager closes.
func (s *Manager) pruneGrantsLoop() {
	ticker := time.NewTicker(grantPruneInterval)
	defer ticker.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-ticker.C:
			if _, err := s.uploads.PruneGrants(); err != nil {
				s.log.Error("prune expired upload grants", "err", err)
			}
		}
	}
}
