package templatebuild

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/buildcontext"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

// uploadParallelism bounds the archives spooled and uploaded at once: each holds a
// temporary file and a connection.
const uploadParallelism = 4

// uploadMissing asks the server for every archive and uploads those it does not have, or
// whose step forces the upload, a few at a time; an archive shared by several steps is
// asked for once. Each is spooled to a temporary file (every file checked against the
// planned hash) and streamed from there; steps whose files changed since the plan are
// one *PlanError.
func uploadMissing(ctx context.Context, api *e2bapi.Client, templateID string, copies []Copy, log e2bapi.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, uploadParallelism)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	var changed []Issue
	var unique []Copy
	at := map[string]int{}
	for _, c := range copies {
		if i, ok := at[c.Hash]; ok {
			unique[i].forceUpload = unique[i].forceUpload || c.forceUpload
			continue
		}
		at[c.Hash] = len(unique)
		unique = append(unique, c)
	}
	for _, c := range unique {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := uploadOne(ctx, api, templateID, c, log); err != nil {
				mu.Lock()
				if errors.Is(err, buildcontext.ErrChanged) {
					changed = append(changed, changedIssue(c, err))
				} else {
					errs = append(errs, fmt.Errorf("%s: %w", c.Name(), err))
				}
				mu.Unlock()
				cancel()
			}
		})
	}
	wg.Wait()
	if len(changed) > 0 {
		errs = append(errs, &PlanError{changed})
	}
	return errors.Join(errs...)
}

func uploadOne(ctx context.Context, api *e2bapi.Client, templateID string, c Copy, log e2bapi.Logger) error {
	link, err := api.GetFileUploadLink(ctx, templateID, c.Hash)
	if err != nil {
		return err
	}
	if link.Present && !c.forceUpload {
		log.Info(ctx, "build context already uploaded", map[string]any{"files_hash": c.Hash})
		return nil
	}
	if link.URL == "" {
		return fmt.Errorf("E2B has no archive with files hash %s and gave no upload URL", c.Hash)
	}
	started := time.Now()
	name, size, err := c.spoolArchive(ctx)
	if err != nil {
		return err
	}
	defer os.Remove(name)
	f, err := os.Open(name) //nolint:gosec // G703: the temporary file spoolArchive just created, not a path from the configuration
	if err != nil {
		return err
	}
	defer f.Close()
	if err := api.UploadArchive(ctx, link, f, size); err != nil {
		return err
	}
	log.Info(ctx, "build context uploaded", map[string]any{
		"files_hash": c.Hash, "bytes": size, "duration_ms": time.Since(started).Milliseconds(),
	})
	return nil
}
