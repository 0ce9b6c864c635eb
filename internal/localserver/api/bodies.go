package api

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// Request bodies have their own deadline (Config.BodyReadTimeout; uploads
// Config.UploadReadTimeout; sandbox traffic none, its streams are
// long-lived), set by the handler only while the body is read.

// Defaults of the body deadlines.
const (
	DefaultBodyReadTimeout   = time.Minute
	DefaultUploadReadTimeout = time.Hour
)

// boundBody gives the rest of r's body until d to arrive, then lifts the
// deadline as soon as the body has been read or closed: a deadline left in
// place would cancel the request's context while the handler still works.
func boundBody(w http.ResponseWriter, r *http.Request, d time.Duration) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(d)) != nil {
		return
	}
	r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
}

type deadlineBody struct {
	io.ReadCloser
	once sync.Once
	lift func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.lift)
	}
	return n, err
}

func (b *deadlineBody) Close() error {
	b.once.Do(b.lift)
	return b.ReadCloser.Close()
}
