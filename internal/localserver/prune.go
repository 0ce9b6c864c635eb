package localserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/docker"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// PruneOptions configure Prune: the flags of `server prune`.
type PruneOptions struct {
	// DataDir is the server's data directory: its records, and the
	// instance its objects on the engine are labelled with (InstanceOf).
	DataDir string
	// List prints what the server keeps on the engine and removes nothing.
	List bool
}

// Prune removes from the Docker engine (DOCKER_HOST) what the server of
// o.DataDir keeps there and none of its records owns, its whole layer
// cache included, and prints to w what it removed, what it kept and the
// space freed. It updates the records first as a start does (builds that
// were running fail, sandboxes that ended are forgotten). The server must
// be stopped: a running one holds its records, and Prune then fails,
// naming it, before it removes anything. With o.List it prints what the
// server keeps, with sizes, and removes nothing, also while it runs.
func Prune(ctx context.Context, o PruneOptions, w io.Writer, log *slog.Logger) error {
	dataDir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return err
	}
	instance := InstanceOf(dataDir)
	if o.List {
		objects, err := docker.Objects(ctx, "", instance)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "KIND\tNAME\tSIZE\tUNIQUE")
		for _, obj := range objects {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", obj.Kind, obj.Name, size(obj.Size), size(obj.Unique))
		}
		tw.Flush()
		fmt.Fprintf(w, "%d objects of the server of %s on the engine (SIZE counts the layers an image shares, UNIQUE only its own)\n", len(objects), dataDir)
		return nil
	}
	c, err := storedClaims(dataDir, log)
	if err != nil {
		return err
	}
	report, err := docker.Prune(ctx, docker.PruneOptions{Instance: instance, KeepSandbox: c.sandbox, KeepImage: c.image})
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "\tKIND\tNAME\tSIZE\tUNIQUE")
	for _, obj := range report.Removed {
		fmt.Fprintf(tw, "removed\t%s\t%s\t%s\t%s\n", obj.Kind, obj.Name, size(obj.Size), size(obj.Unique))
	}
	for _, obj := range report.Kept {
		fmt.Fprintf(tw, "kept\t%s\t%s\t%s\t%s\n", obj.Kind, obj.Name, size(obj.Size), size(obj.Unique))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d removed, %d kept (records own them, or containers run from them); %s freed\n", len(report.Removed), len(report.Kept), size(report.Freed))
	return err
}

// storedClaims opens the records in dataDir and returns what they own on
// the engine (recoverClaims); nothing when there are none (the directory
// was deleted: everything of its instance goes).
func storedClaims(dataDir string, log *slog.Logger) (claims, error) {
	path := filepath.Join(dataDir, stateFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return claims{}, nil
	}
	st, err := store.Open(path, DefaultTeamSlug, time.Now)
	if err != nil {
		var info Info
		if raw, rerr := os.ReadFile(filepath.Join(dataDir, InfoFile)); rerr == nil && json.Unmarshal(raw, &info) == nil {
			return claims{}, fmt.Errorf("the server of %s is running (PID %d, %s): stop it first (--list shows what it keeps meanwhile): %w", dataDir, info.PID, info.APIURL, err)
		}
		return claims{}, fmt.Errorf("is the server of %s running? Stop it first: %w", dataDir, err)
	}
	defer st.Close()
	return recoverClaims(st, filepath.Join(dataDir, spoolDirName), time.Now(), log)
}

// size is n bytes for people; "-" when unknown (negative).
func size(n int64) string {
	switch {
	case n < 0:
		return "-"
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
}
