//go:build linux

package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/filesystem"
)

// filesystemService implements filesystem.Filesystem (design/e2b-api.md "filesystem.proto").
// Operations run as the daemon (root in a sandbox), like envd's; what the
// daemon creates for a user is given to that user.
type filesystemService struct {
	s *Server
}

// path resolves a request path for the request's user (an empty one is the
// default workdir or the home, as on envd).
func (fsv *filesystemService) path(h http.Header, p string) (*osUser, string, error) {
	u, err := fsv.s.rpcUser(h)
	if err != nil {
		return nil, "", err
	}
	resolved, err := u.resolvePath(p, fsv.s.settings().defaultWorkdir)
	if err != nil {
		return nil, "", connect.NewError(connect.CodeInvalidArgument, err)
	}
	return u, resolved, nil
}

// destructivePath is path for Remove and Move, where an empty path is
// refused: envd would remove or move the whole home directory
// (design/envd.md).
func (fsv *filesystemService) destructivePath(h http.Header, p string) (*osUser, string, error) {
	if p == "" {
		return nil, "", connect.NewError(connect.CodeInvalidArgument, errors.New("path is empty"))
	}
	return fsv.path(h, p)
}

func (fsv *filesystemService) Stat(_ context.Context, req *connect.Request[pb.StatRequest]) (*connect.Response[pb.StatResponse], error) {
	_, path, err := fsv.path(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	entry, err := entryInfo(path)
	if err != nil {
		return nil, entryError(err)
	}
	return connect.NewResponse(&pb.StatResponse{Entry: entry}), nil
}

func (fsv *filesystemService) MakeDir(_ context.Context, req *connect.Request[pb.MakeDirRequest]) (*connect.Response[pb.MakeDirResponse], error) {
	u, path, err := fsv.path(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	// envd's codes (design/envd.md): the SDKs read already_exists as "was
	// there", so a file in the way must be something else.
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("directory already exists: %s", path))
	case err == nil:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path already exists but it is not a directory: %s", path))
	case !errors.Is(err, fs.ErrNotExist):
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error getting file info: %w", err))
	}
	if err := u.mkdirAll(path); err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	entry, err := entryInfo(path)
	if err != nil {
		return nil, fsError(err, path)
	}
	return connect.NewResponse(&pb.MakeDirResponse{Entry: entry}), nil
}

func (fsv *filesystemService) Move(_ context.Context, req *connect.Request[pb.MoveRequest]) (*connect.Response[pb.MoveResponse], error) {
	u, src, err := fsv.destructivePath(req.Header(), req.Msg.GetSource())
	if err != nil {
		return nil, err
	}
	_, dst, err := fsv.destructivePath(req.Header(), req.Msg.GetDestination())
	if err != nil {
		return nil, err
	}
	// A missing source is found before the destination's parents are made
	// (envd makes them first), with envd's message.
	if _, err := os.Lstat(src); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && errors.Is(err, fs.ErrNotExist) {
			return nil, moveError(&os.LinkError{Op: "rename", Old: src, New: dst, Err: pe.Err})
		}
		return nil, fsError(err, src)
	}
	if err := u.mkdirAll(filepath.Dir(dst)); err != nil {
		return nil, fsError(err, filepath.Dir(dst))
	}
	if err := os.Rename(src, dst); err != nil {
		return nil, moveError(err)
	}
	entry, err := entryInfo(dst)
	if err != nil {
		return nil, entryError(err)
	}
	return connect.NewResponse(&pb.MoveResponse{Entry: entry}), nil
}

func (fsv *filesystemService) ListDir(_ context.Context, req *connect.Request[pb.ListDirRequest]) (*connect.Response[pb.ListDirResponse], error) {
	_, path, err := fsv.path(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	resolved, err := filepath.EvalSymlinks(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("path not found: %w", err))
	case err != nil && strings.Contains(err.Error(), "too many links"):
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("cyclic symlink or chain >255 links at %q", path))
	case err != nil:
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error resolving symlink: %w", err))
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return nil, fsError(err, resolved)
	}
	if !fi.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path is not a directory: %s", resolved))
	}
	depth := int(req.Msg.GetDepth())
	if depth == 0 {
		depth = 1
	}
	var entries []*pb.EntryInfo
	if err := listDir(path, depth, &entries); err != nil {
		return nil, fsError(err, path)
	}
	return connect.NewResponse(&pb.ListDirResponse{Entries: entries}), nil
}

// listDir appends the entries of dir and, down to depth levels, of its
// subdirectories (symlinks are listed, not descended into).
func listDir(dir string, depth int, out *[]*pb.EntryInfo) error {
	des, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, de := range des {
		p := filepath.Join(dir, de.Name())
		entry, err := entryInfo(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed while listing
		}
		if err != nil {
			return err
		}
		*out = append(*out, entry)
		if depth > 1 && de.IsDir() {
			if err := listDir(p, depth-1, out); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

func (fsv *filesystemService) Remove(_ context.Context, req *connect.Request[pb.RemoveRequest]) (*connect.Response[pb.RemoveResponse], error) {
	_, path, err := fsv.destructivePath(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	// A missing path is removed already: envd answers {} (design/envd.md).
	if err := os.RemoveAll(path); err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error removing file or directory: %w", err))
	}
	return connect.NewResponse(&pb.RemoveResponse{}), nil
}

func (fsv *filesystemService) WatchDir(ctx context.Context, req *connect.Request[pb.WatchDirRequest], stream *connect.ServerStream[pb.WatchDirResponse]) error {
	dw, err := fsv.watch(req.Header(), req.Msg)
	if err != nil {
		return err
	}
	defer dw.close()
	if err := stream.Send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Start{Start: &pb.WatchDirResponse_StartEvent{}}}); err != nil {
		return connect.NewError(connect.CodeUnknown, fmt.Errorf("error sending start event: %w", err))
	}
	interval := keepaliveInterval(req.Header())
	keepalive := time.NewTimer(interval)
	defer keepalive.Stop()
	events := make(chan *pb.FilesystemEvent)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	failed := make(chan error, 1)
	go func() {
		failed <- dw.run(ctx, func(ev *pb.FilesystemEvent) error {
			select {
			case events <- ev:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	for {
		select {
		case ev := <-events:
			if err := stream.Send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Filesystem{Filesystem: ev}}); err != nil {
				return connect.NewError(connect.CodeUnknown, fmt.Errorf("error sending filesystem event: %w", err))
			}
			keepalive.Reset(interval)
		case <-keepalive.C:
			if err := stream.Send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Keepalive{Keepalive: &pb.WatchDirResponse_KeepAlive{}}}); err != nil {
				return connect.NewError(connect.CodeUnknown, fmt.Errorf("error sending keepalive: %w", err))
			}
			keepalive.Reset(interval)
		case err := <-failed:
			if err == nil {
				return ctx.Err()
			}
			return err
		}
	}
}

func (fsv *filesystemService) CreateWatcher(ctx context.Context, req *connect.Request[pb.CreateWatcherRequest]) (*connect.Response[pb.CreateWatcherResponse], error) {
	dw, err := fsv.watch(req.Header(), req.Msg)
	if err != nil {
		return nil, err
	}
	id := fsv.s.watchers.add(startBufferedWatcher(ctx, dw))
	return connect.NewResponse(&pb.CreateWatcherResponse{WatcherId: id}), nil
}

func (fsv *filesystemService) GetWatcherEvents(_ context.Context, req *connect.Request[pb.GetWatcherEventsRequest]) (*connect.Response[pb.GetWatcherEventsResponse], error) {
	bw, err := fsv.s.watchers.get(req.Msg.GetWatcherId())
	if err != nil {
		return nil, err
	}
	events, err := bw.take()
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.GetWatcherEventsResponse{Events: events}), nil
}

func (fsv *filesystemService) RemoveWatcher(_ context.Context, req *connect.Request[pb.RemoveWatcherRequest]) (*connect.Response[pb.RemoveWatcherResponse], error) {
	if err := fsv.s.watchers.remove(req.Msg.GetWatcherId()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.RemoveWatcherResponse{}), nil
}

// watch starts watching the directory a WatchDir or CreateWatcher request
// names.
func (fsv *filesystemService) watch(h http.Header, req watchRequest) (*dirWatcher, error) {
	_, path, err := fsv.path(h, req.GetPath())
	if err != nil {
		return nil, err
	}
	return newDirWatcher(path, req)
}

// entryInfo describes path as envd does (design/envd.md): name, size,
// permissions, times and owner are the entry's own (a symlink's are the
// link's), but a symlink has its target's type and permission bits and its
// resolved absolute target; a broken one has no type, mode 0 and itself as
// target. Metadata is the user.e2b.* attributes (metadata.go).
func entryInfo(path string) (*pb.EntryInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	entry := &pb.EntryInfo{
		Name:         fi.Name(),
		Type:         fileType(fi.Mode()),
		Path:         path,
		Size:         fi.Size(),
		Mode:         uint32(fi.Mode().Perm()),
		Permissions:  fi.Mode().String(),
		ModifiedTime: timestamppb.New(fi.ModTime()),
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		entry.Owner = userName(st.Uid)
		entry.Group = groupName(st.Gid)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(path)
		if err != nil {
			target = path
		}
		entry.SymlinkTarget = &target
		entry.Type, entry.Mode = pb.FileType_FILE_TYPE_UNSPECIFIED, 0
		if ti, err := os.Stat(target); err == nil {
			entry.Type, entry.Mode = fileType(ti.Mode()), uint32(ti.Mode().Perm())
		}
	}
	entry.Metadata = readMetadata(path)
	return entry, nil
}

// fileType is the type of a followed entry: envd never reports
// FILE_TYPE_SYMLINK.
func fileType(m fs.FileMode) pb.FileType {
	switch {
	case m.IsDir():
		return pb.FileType_FILE_TYPE_DIRECTORY
	case m.IsRegular():
		return pb.FileType_FILE_TYPE_FILE
	default:
		return pb.FileType_FILE_TYPE_UNSPECIFIED
	}
}

func userName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil {
		return u.Username
	}
	return id
}

func groupName(gid uint32) string {
	id := strconv.FormatUint(uint64(gid), 10)
	if g, err := user.LookupGroupId(id); err == nil {
		return g.Name
	}
	return id
}

// fsError maps a filesystem error to its Connect code.
// entryError is envd's answer when an entry cannot be described.
func entryError(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("file not found: %w", err))
	}
	return connect.NewError(connect.CodeInternal, fmt.Errorf("error getting file info: %w", err))
}

// moveError is envd's answer when Move's rename fails.
func moveError(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("source file not found: %w", err))
	}
	return connect.NewError(connect.CodeInternal, fmt.Errorf("error renaming: %w", err))
}

func fsError(err error, path string) error {
	var ce *connect.Error
	switch {
	case errors.As(err, &ce):
		return err
	case errors.Is(err, fs.ErrNotExist):
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("path '%s' does not exist", path))
	case errors.Is(err, fs.ErrPermission):
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("path '%s': %w", path, err))
	case errors.Is(err, fs.ErrExist):
		return connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("path '%s' already exists", path))
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EXDEV):
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path '%s': %w", path, err))
	default:
		return connect.NewError(connect.CodeInternal, fmt.Errorf("path '%s': %w", path, err))
	}
}
