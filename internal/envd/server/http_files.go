//go:build linux

package server

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	"github.com/klauspost/compress/gzip"
)

// filesCaller checks the credentials of a /files request for operation
// ("read" or "write") and resolves the user it acts as; when either fails it
// has answered 401.
func (s *Server) filesCaller(w http.ResponseWriter, r *http.Request, operation string) (*osUser, bool) {
	if err := s.authorizeFiles(r, operation); err != nil {
		writeError(w, http.StatusUnauthorized, err.Error())
		return nil, false
	}
	u, err := s.filesUser(r)
	if err != nil {
		writeError(w, http.StatusUnauthorized, err.Error())
		return nil, false
	}
	return u, true
}

// filesUser resolves the user of a /files request: the username query
// parameter, else the default user.
func (s *Server) filesUser(r *http.Request) (*osUser, error) {
	name := r.URL.Query().Get("username")
	if name == "" {
		name = s.settings().defaultUser
	}
	u, err := lookupUser(name)
	if err != nil {
		return nil, fmt.Errorf("error looking up user '%s': %v", name, err)
	}
	return u, nil
}

// authorizeFiles accepts, once /init set a token, the token or a signature
// of the request (design/e2b-api.md "envd plain HTTP endpoints"): "v1_" + base64 std no-pad of
// sha256("<path>:<read|write>:<username>:<token>[:<expiration>]"). A token
// header that is sent must be right, even beside a valid signature. The
// errors are envd's messages.
func (s *Server) authorizeFiles(r *http.Request, operation string) error {
	token := s.settings().accessToken
	if token == "" {
		return nil
	}
	if got := r.Header.Get(envd.HeaderAccessToken); got != "" {
		if !tokenMatches(token, got) {
			return errors.New("access token present in header but does not match")
		}
		return nil
	}
	q := r.URL.Query()
	if !q.Has("signature") {
		return errors.New("missing signature query parameter")
	}
	payload := q.Get("path") + ":" + operation + ":" + q.Get("username") + ":" + token
	rawExpiration := q.Get("signature_expiration")
	var expiration int64
	if rawExpiration != "" {
		exp, err := strconv.ParseInt(rawExpiration, 10, 64)
		if err != nil {
			return errors.New("invalid signature")
		}
		expiration = exp
		payload += ":" + strconv.FormatInt(exp, 10)
	}
	sum := sha256.Sum256([]byte(payload))
	want := "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
	if subtle.ConstantTimeCompare([]byte(want), []byte(q.Get("signature"))) != 1 {
		return errors.New("invalid signature")
	}
	if rawExpiration != "" && expiration < time.Now().Unix() {
		return errors.New("signature is already expired")
	}
	return nil
}

func (s *Server) handleDownload(w http.ResponseWriter, r *http.Request) {
	u, ok := s.filesCaller(w, r, "read")
	if !ok {
		return
	}
	// Without a path: the default workdir or the home, a directory (envd's
	// 400 for it).
	requested := r.URL.Query().Get("path")
	path, err := u.resolvePath(requested, s.settings().defaultWorkdir)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("error expanding and resolving path '%s': %v", requested, err))
		return
	}
	f, err := os.Open(path) //nolint:gosec // envd opens the paths its clients name, as the user they name: that is its API (design/envd.md)
	if err != nil {
		writeFileError(w, err, path)
		return
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		writeFileError(w, err, path)
		return
	}
	if fi.IsDir() {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("path '%s' is a directory", path))
		return
	}
	useGzip, ok := negotiateEncoding(r.Header.Get("Accept-Encoding"))
	if !ok {
		writeError(w, http.StatusNotAcceptable, "no acceptable encoding found, supported: [identity, gzip]")
		return
	}
	w.Header().Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": fi.Name()}))
	w.Header().Add("Vary", "Accept-Encoding")
	// Typed by the requested path's extension, as envd does: identity
	// through ServeContent (which sniffs an unknown type), gzip by the
	// extension or application/octet-stream.
	if !useGzip {
		// Ranges and conditional requests, identity only.
		http.ServeContent(w, r, requested, fi.ModTime(), f)
		return
	}
	contentType := mime.TypeByExtension(filepath.Ext(requested))
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Encoding", "gzip")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	zw := gzip.NewWriter(w)
	if _, err := io.Copy(zw, f); err != nil {
		// Headers are out: abort the response so the client sees a broken
		// transfer rather than a short file.
		panic(http.ErrAbortHandler)
	}
	_ = zw.Close()
}

// negotiateEncoding picks gzip or identity for Accept-Encoding; ok is false
// when neither is acceptable.
func negotiateEncoding(header string) (useGzip, ok bool) {
	if strings.TrimSpace(header) == "" {
		return false, true
	}
	q := map[string]float64{}
	for _, item := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(item), ";")
		weight := 1.0
		if v, found := strings.CutPrefix(strings.TrimSpace(params), "q="); found {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				weight = f
			}
		}
		q[strings.ToLower(strings.TrimSpace(coding))] = weight
	}
	weight := func(coding string, fallback float64) float64 {
		if w, found := q[coding]; found {
			return w
		}
		if w, found := q["*"]; found {
			return w
		}
		return fallback
	}
	gz, identity := weight("gzip", 0), weight("identity", 1)
	switch {
	case gz > 0 && gz >= identity:
		return true, true
	case identity > 0:
		return false, true
	default:
		return false, false
	}
}

// uploadedEntry is one element of POST /files' answer.
type uploadedEntry struct {
	Path     string            `json:"path"`
	Name     string            `json:"name"`
	Type     string            `json:"type"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// httpError is an error with the HTTP status it answers with.
type httpError struct {
	status  int
	message string
}

func (e *httpError) Error() string { return e.message }

func (s *Server) handleUpload(w http.ResponseWriter, r *http.Request) {
	u, ok := s.filesCaller(w, r, "write")
	if !ok {
		return
	}
	entries, err := s.receiveUpload(r, u)
	if err != nil {
		var he *httpError
		if errors.As(err, &he) {
			writeError(w, he.status, he.message)
		} else {
			writeError(w, http.StatusInternalServerError, err.Error())
		}
		return
	}
	writeJSON(w, http.StatusOK, contentTypeUpload, entries)
}

func (s *Server) receiveUpload(r *http.Request, u *osUser) ([]uploadedEntry, error) {
	query := r.URL.Query()
	resolve := func(p string) (string, error) {
		resolved, err := u.resolvePath(p, s.settings().defaultWorkdir)
		if err != nil {
			return "", &httpError{http.StatusBadRequest, fmt.Sprintf("error resolving path: %v", err)}
		}
		return resolved, nil
	}
	metadata, err := uploadMetadata(r.Header)
	if err != nil {
		return nil, &httpError{http.StatusBadRequest, fmt.Sprintf("invalid metadata: %v", err)}
	}
	mediaType, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return nil, &httpError{http.StatusBadRequest, fmt.Sprintf("invalid Content-Type: %v", err)}
	}
	// Read the connection in large pieces: multipart's parts, and net/http's
	// own buffer, hand out at most 4 KiB a read, and under gVisor every
	// system call is the price (design/performance.md, "Bytes through envd").
	received := bufio.NewReaderSize(r.Body, uploadBufferSize)
	switch mediaType {
	case "application/octet-stream":
		if !query.Has("path") {
			return nil, &httpError{http.StatusBadRequest, "path query parameter is required for raw body upload"}
		}
		path, err := resolve(query.Get("path"))
		if err != nil {
			return nil, err
		}
		var body io.Reader = received
		switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
		case "", "identity":
		case "gzip":
			zr, err := gzip.NewReader(received)
			if err != nil {
				return nil, &httpError{http.StatusBadRequest, fmt.Sprintf("invalid gzip body: %v", err)}
			}
			defer func() { _ = zr.Close() }()
			body = zr
		default:
			return nil, &httpError{http.StatusBadRequest, fmt.Sprintf("unsupported Content-Encoding %q, supported: [identity, gzip]", enc)}
		}
		entry, err := writeUpload(u, path, body, metadata)
		if err != nil {
			return nil, err
		}
		return []uploadedEntry{entry}, nil
	case "multipart/form-data":
		boundary := params["boundary"]
		if boundary == "" {
			return nil, &httpError{http.StatusBadRequest, "invalid multipart body: no multipart boundary param in Content-Type"}
		}
		mr := multipart.NewReader(received, boundary)
		// A body without a part named file uploads nothing: 200 [] as on
		// envd (design/envd.md).
		entries := []uploadedEntry{}
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, &httpError{http.StatusBadRequest, fmt.Sprintf("invalid multipart body: %v", err)}
			}
			if part.FormName() != "file" {
				continue
			}
			target, err := partTarget(query, part)
			if err != nil {
				return nil, err
			}
			path, err := resolve(target)
			if err != nil {
				return nil, err
			}
			entry, err := writeUpload(u, path, part, metadata)
			if err != nil {
				return nil, err
			}
			entries = append(entries, entry)
		}
		return entries, nil
	default:
		return nil, &httpError{http.StatusBadRequest, fmt.Sprintf("unsupported Content-Type %q, supported: multipart/form-data, application/octet-stream", mediaType)}
	}
}

// partTarget is where a multipart part goes: the path query parameter when
// given, else the part's raw filename (Part.FileName drops directories, but
// the SDKs send the destination path there).
func partTarget(query url.Values, part *multipart.Part) (string, error) {
	if query.Has("path") {
		return query.Get("path"), nil
	}
	_, params, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
	if err != nil {
		return "", &httpError{http.StatusBadRequest, fmt.Sprintf("error getting multipart custom part file name: %v", err)}
	}
	filename, ok := params["filename"]
	if !ok {
		return "", &httpError{http.StatusBadRequest, "error getting multipart custom part file name: filename not found in Content-Disposition header"}
	}
	return filename, nil
}

// writeUpload streams body into path for u: parents are created and given to
// u, the file is written beside the target and renamed over it, so a failed
// upload never destroys the previous content; its metadata is the upload's
// alone.
func writeUpload(u *osUser, path string, body io.Reader, metadata map[string]string) (uploadedEntry, error) {
	dir := filepath.Dir(path)
	if err := u.mkdirAll(dir); err != nil {
		if isNoSpace(err) {
			return uploadedEntry{}, uploadError(err, dir)
		}
		return uploadedEntry{}, fmt.Errorf("error ensuring directories: %w", err)
	}
	mode := fs.FileMode(0o644)
	fi, err := os.Stat(path) //nolint:gosec // envd opens the paths its clients name, as the user they name: that is its API (design/envd.md)
	switch {
	case err == nil && fi.IsDir():
		return uploadedEntry{}, &httpError{http.StatusBadRequest, fmt.Sprintf("path is a directory: %s", path)}
	case err == nil:
		mode = fi.Mode().Perm()
	case !errors.Is(err, fs.ErrNotExist):
		return uploadedEntry{}, fmt.Errorf("error getting file info: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+uploadTempInfix+"*")
	if err != nil {
		return uploadedEntry{}, uploadError(err, path)
	}
	committed := false
	defer func() {
		if !committed {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name()) //nolint:gosec // envd opens the paths its clients name, as the user they name: that is its API (design/envd.md)
		}
	}()
	if err := tmp.Chmod(mode); err != nil {
		return uploadedEntry{}, uploadError(err, path)
	}
	if err := u.chown(tmp.Name()); err != nil {
		return uploadedEntry{}, uploadError(err, path)
	}
	// Written in large pieces too, whatever sizes the body's reads return.
	dst := &recordingWriter{w: tmp}
	buffered := bufio.NewWriterSize(dst, uploadBufferSize)
	if _, err := io.Copy(buffered, body); err != nil {
		if dst.err != nil {
			return uploadedEntry{}, uploadError(dst.err, path)
		}
		return uploadedEntry{}, &httpError{http.StatusBadRequest, fmt.Sprintf("reading the upload of '%s': %v", path, err)}
	}
	if err := buffered.Flush(); err != nil {
		return uploadedEntry{}, uploadError(err, path)
	}
	if err := writeMetadata(tmp, metadata); err != nil {
		return uploadedEntry{}, err
	}
	if err := tmp.Close(); err != nil {
		return uploadedEntry{}, uploadError(err, path)
	}
	if err := os.Rename(tmp.Name(), path); err != nil { //nolint:gosec // envd opens the paths its clients name, as the user they name: that is its API (design/envd.md)
		return uploadedEntry{}, uploadError(err, path)
	}
	committed = true
	return uploadedEntry{Path: path, Name: filepath.Base(path), Type: "file", Metadata: readMetadata(path)}, nil
}

// uploadBufferSize is the size of the pieces an upload is read from its
// connection and written to its file in.
const uploadBufferSize = 1 << 20

// uploadTempInfix marks the temporary an upload is written to beside its
// target, ".<name>.upload-<random digits>" (os.CreateTemp's digits).
const uploadTempInfix = ".upload-"

// uploadTarget is the name of the file that an upload temporary named base
// replaces, or "" when base names no upload temporary.
func uploadTarget(base string) string {
	i := strings.LastIndex(base, uploadTempInfix)
	if i < 2 || base[0] != '.' {
		return ""
	}
	if digits := base[i+len(uploadTempInfix):]; digits == "" || strings.Trim(digits, "0123456789") != "" {
		return ""
	}
	return base[1:i]
}

// recordingWriter remembers a write error so that a failed copy can tell the
// disk's fault from the client's.
type recordingWriter struct {
	w   io.Writer
	err error
}

func (rw *recordingWriter) Write(p []byte) (int, error) {
	n, err := rw.w.Write(p)
	if err != nil {
		rw.err = err
	}
	return n, err
}

func uploadError(err error, path string) error {
	if isNoSpace(err) {
		return &httpError{http.StatusInsufficientStorage, "not enough disk space available"}
	}
	return fmt.Errorf("error writing file '%s': %v", path, err)
}

func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// writeFileError answers a failure to open a file for download.
func writeFileError(w http.ResponseWriter, err error, path string) {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		writeError(w, http.StatusNotFound, fmt.Sprintf("path '%s' does not exist", path))
	default:
		// Also a parent that is a file (ENOTDIR), as on envd.
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("error checking if path exists '%s': %v", path, err))
	}
}
