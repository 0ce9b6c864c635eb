//go:build linux

package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"connectrpc.com/connect"
	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"

	pb "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/filesystem"
)

// maxBufferedEvents bounds what a CreateWatcher watcher keeps between two
// GetWatcherEvents calls: the kernel's default inotify queue length
// (fs.inotify.max_queued_events). Past it the watcher fails with an
// overflow, as a stream does when the kernel's queue overflows.
const maxBufferedEvents = 16384

// Magic numbers of the network filesystems envd refuses to watch unless
// allow_network_mounts is set (linux/magic.h).
var networkFilesystems = map[int64]bool{
	0x6969:     true, // NFS
	0xFF534D42: true, // CIFS
	0x517B:     true, // SMB
	0xFE534D42: true, // SMB2
	0x65735546: true, // FUSE
}

// watchRequest is what WatchDir and CreateWatcher share.
type watchRequest interface {
	GetPath() string
	GetRecursive() bool
	GetIncludeEntry() bool
	GetAllowNetworkMounts() bool
}

// dirWatcher watches one directory, and with recursive every directory
// below it, with inotify, and turns what happens there into envd's events
// (design/envd.md). Its methods run on one goroutine.
type dirWatcher struct {
	root         string
	recursive    bool
	includeEntry bool
	w            *fsnotify.Watcher
	// subdirs are the directories below root that are watched.
	subdirs map[string]bool
	// committing is the target of the upload whose temporary was just
	// renamed: the rename's other half is that upload's commit.
	committing string
}

// newDirWatcher checks the request's path as envd does and starts watching it.
func newDirWatcher(root string, req watchRequest) (*dirWatcher, error) {
	fi, err := os.Stat(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("path %s not found: %w", root, err))
	case err != nil:
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error statting path %s: %w", root, err))
	case !fi.IsDir():
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path %s not a directory", root))
	}
	if !req.GetAllowNetworkMounts() {
		var st unix.Statfs_t
		if err := unix.Statfs(root, &st); err != nil {
			return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error checking mount status: failed to statfs %s: %w", root, err))
		}
		if networkFilesystems[int64(uint32(st.Type))] { //nolint:gosec // f_type is a 32-bit magic, an int32 on 32-bit Linux: read it unsigned
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cannot watch path on network filesystem: %s", root))
		}
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error creating watcher: %w", err))
	}
	dw := &dirWatcher{root: root, recursive: req.GetRecursive(), includeEntry: req.GetIncludeEntry(), w: w, subdirs: map[string]bool{}}
	if err := w.Add(root); err != nil {
		_ = w.Close()
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error adding path %s to watcher: %w", root, err))
	}
	if dw.recursive {
		if err := dw.addTree(root, nil); err != nil {
			_ = w.Close()
			return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error adding path %s to watcher: %w", root, err))
		}
	}
	return dw, nil
}

// close stops watching; run returns.
func (dw *dirWatcher) close() { _ = dw.w.Close() }

// run passes events to emit until ctx ends (nil), emit fails (its error) or
// the watcher fails (an internal error, e.g. the kernel's queue overflowed).
func (dw *dirWatcher) run(ctx context.Context, emit func(*pb.FilesystemEvent) error) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case err, ok := <-dw.w.Errors:
			if !ok {
				return connect.NewError(connect.CodeInternal, errors.New("watcher error channel closed"))
			}
			return connect.NewError(connect.CodeInternal, fmt.Errorf("watcher error: %w", err))
		case ev, ok := <-dw.w.Events:
			if !ok {
				return connect.NewError(connect.CodeInternal, errors.New("watcher event channel closed"))
			}
			if err := dw.handle(ev, emit); err != nil {
				return err
			}
		}
	}
}

// handle emits the events of one inotify event. With recursive, a directory
// that appears is watched before its Create is emitted (so that a client
// that reacts to it misses nothing below it), then everything already in it
// is announced as created, as E2B's recursive watcher does for `mkdir -p`
// and for trees moved in; a directory that goes away is no longer watched.
//
// An upload's temporary is never reported: envd writes an upload in place,
// so its clients see the target only. The rename that commits an upload
// shows as the target's CREATE, CHMOD and WRITE, what envd's open, chown
// and write of a new file show (design/envd.md, Watching).
func (dw *dirWatcher) handle(ev fsnotify.Event, emit func(*pb.FilesystemEvent) error) error {
	if target := uploadTarget(filepath.Base(ev.Name)); target != "" {
		if ev.Has(fsnotify.Rename) {
			dw.committing = filepath.Join(filepath.Dir(ev.Name), target)
		}
		return nil
	}
	op := ev.Op
	if ev.Name == dw.committing && ev.Has(fsnotify.Create) {
		op |= fsnotify.Chmod | fsnotify.Write
	}
	dw.committing = ""
	var created []string
	if dw.recursive {
		switch {
		case ev.Has(fsnotify.Create):
			if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
				if err := dw.addTree(ev.Name, &created); err != nil {
					return connect.NewError(connect.CodeInternal, fmt.Errorf("watcher error: %w", err))
				}
			}
		case dw.subdirs[ev.Name] && (ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename)):
			dw.forget(ev.Name)
		}
	}
	if err := dw.emitOps(ev.Name, op, emit); err != nil {
		return err
	}
	for _, p := range created {
		if err := dw.emitOps(p, fsnotify.Create, emit); err != nil {
			return err
		}
	}
	return nil
}

// emitOps emits one event per operation, in envd's order; an upload's
// temporary has none.
func (dw *dirWatcher) emitOps(path string, op fsnotify.Op, emit func(*pb.FilesystemEvent) error) error {
	if uploadTarget(filepath.Base(path)) != "" {
		return nil
	}
	name, err := filepath.Rel(dw.root, path)
	if err != nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("error getting relative path: %w", err))
	}
	for _, o := range []struct {
		op  fsnotify.Op
		typ pb.EventType
	}{
		{fsnotify.Create, pb.EventType_EVENT_TYPE_CREATE},
		{fsnotify.Rename, pb.EventType_EVENT_TYPE_RENAME},
		{fsnotify.Chmod, pb.EventType_EVENT_TYPE_CHMOD},
		{fsnotify.Write, pb.EventType_EVENT_TYPE_WRITE},
		{fsnotify.Remove, pb.EventType_EVENT_TYPE_REMOVE},
	} {
		if !op.Has(o.op) {
			continue
		}
		event := &pb.FilesystemEvent{Name: name, Type: o.typ}
		// Remove and rename name a path whose entry is gone: never an
		// entry that replaced it since.
		if dw.includeEntry && o.typ != pb.EventType_EVENT_TYPE_RENAME && o.typ != pb.EventType_EVENT_TYPE_REMOVE {
			event.Entry, _ = entryInfo(path) // best effort: nil when it is gone already
		}
		if err := emit(event); err != nil {
			return err
		}
	}
	return nil
}

// addTree watches dir and the directories below it (symlinks are not
// followed); with created set, it collects every path below dir. What
// vanishes meanwhile is skipped.
func (dw *dirWatcher) addTree(dir string, created *[]string) error {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if p == dir && p == dw.root {
			return nil // watched by newDirWatcher
		}
		if p != dir && created != nil {
			*created = append(*created, p)
		}
		if !d.IsDir() {
			return nil
		}
		if err := dw.w.Add(p); err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return filepath.SkipDir
			}
			return err
		}
		dw.subdirs[p] = true
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// forget stops watching path and the directories below it, once they were
// removed or moved away (a moved directory keeps its inotify watch, which
// would report under the old name).
func (dw *dirWatcher) forget(path string) {
	prefix := path + string(filepath.Separator)
	for p := range dw.subdirs {
		if p == path || strings.HasPrefix(p, prefix) {
			_ = dw.w.Remove(p) // gone already when it was removed
			delete(dw.subdirs, p)
		}
	}
}

// bufferedWatcher is a CreateWatcher watcher: its events wait, bounded, for
// GetWatcherEvents.
type bufferedWatcher struct {
	dw   *dirWatcher
	stop context.CancelFunc
	done chan struct{}

	mu     sync.Mutex
	events []*pb.FilesystemEvent
	err    error
}

var errTooManyEvents = fmt.Errorf("watcher error: %w (more than %d events waiting for GetWatcherEvents)", fsnotify.ErrEventOverflow, maxBufferedEvents)

// startBufferedWatcher runs dw until close; it outlives the request that
// created it (ctx).
func startBufferedWatcher(ctx context.Context, dw *dirWatcher) *bufferedWatcher {
	ctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	bw := &bufferedWatcher{dw: dw, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(bw.done)
		err := dw.run(ctx, bw.add)
		dw.close()
		if err != nil {
			bw.mu.Lock()
			bw.err = err
			bw.mu.Unlock()
		}
	}()
	return bw
}

func (bw *bufferedWatcher) add(ev *pb.FilesystemEvent) error {
	bw.mu.Lock()
	defer bw.mu.Unlock()
	if len(bw.events) >= maxBufferedEvents {
		return connect.NewError(connect.CodeInternal, errTooManyEvents)
	}
	bw.events = append(bw.events, ev)
	return nil
}

// take returns the events waiting and then, once none are left, the error
// that ended the watcher.
func (bw *bufferedWatcher) take() ([]*pb.FilesystemEvent, error) {
	bw.mu.Lock()
	defer bw.mu.Unlock()
	if len(bw.events) == 0 && bw.err != nil {
		return nil, bw.err
	}
	events := bw.events
	bw.events = nil
	return events, nil
}

// close stops the watcher and waits for its goroutine.
func (bw *bufferedWatcher) close() {
	bw.stop()
	<-bw.done
}

// watcherTable holds the CreateWatcher watchers by ID.
type watcherTable struct {
	mu       sync.Mutex
	watchers map[string]*bufferedWatcher
}

func newWatcherTable() *watcherTable {
	return &watcherTable{watchers: map[string]*bufferedWatcher{}}
}

func (t *watcherTable) add(bw *bufferedWatcher) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		// As envd's: "w" and 20 characters of [a-z0-9].
		id := "w" + strings.ToLower(rand.Text()[:20])
		if _, taken := t.watchers[id]; !taken {
			t.watchers[id] = bw
			return id
		}
	}
}

func (t *watcherTable) get(id string) (*bufferedWatcher, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	bw, ok := t.watchers[id]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher with id %s not found", id))
	}
	return bw, nil
}

// remove stops and forgets the watcher id.
func (t *watcherTable) remove(id string) error {
	t.mu.Lock()
	bw, ok := t.watchers[id]
	delete(t.watchers, id)
	t.mu.Unlock()
	if !ok {
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher with id %s not found", id))
	}
	bw.close()
	return nil
}

// closeAll stops every watcher.
func (t *watcherTable) closeAll() {
	t.mu.Lock()
	all := t.watchers
	t.watchers = map[string]*bufferedWatcher{}
	t.mu.Unlock()
	for _, bw := range all {
		bw.close()
	}
}
