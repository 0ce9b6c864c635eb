package relay

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"
)

// writeRecorder keeps each write apart.
type writeRecorder struct {
	io.Reader
	writes [][]byte
}

func (w *writeRecorder) Write(p []byte) (int, error) {
	w.writes = append(w.writes, bytes.Clone(p))
	return len(p), nil
}

func (w *writeRecorder) Close() error { return nil }

func frameHeader(typ byte, length uint32) []byte {
	h := make([]byte, frameHeaderSize)
	h[1] = typ
	binary.BigEndian.PutUint32(h[4:], 3) // stream ID
	binary.BigEndian.PutUint32(h[8:], length)
	return h
}

func TestMuxConnSendsADataFrameInOneWrite(t *testing.T) {
	rec := &writeRecorder{Reader: bytes.NewReader(nil)}
	c := newMuxConn(rec)
	body := bytes.Repeat([]byte("x"), 1000)
	const typeWindowUpdate = 1
	writes := [][]byte{
		frameHeader(frameTypeData, uint32(len(body))), body,
		frameHeader(typeWindowUpdate, 1<<20), // no body follows
		frameHeader(frameTypeData, 0),        // a SYN or FIN alone
		frameHeader(frameTypeData, maxCoalescedBody+1), make([]byte, maxCoalescedBody+1),
		frameHeader(frameTypeData, 2), []byte("ok"),
	}
	for _, p := range writes {
		if n, err := c.Write(p); n != len(p) || err != nil {
			t.Fatalf("Write(%d bytes) = %d, %v", len(p), n, err)
		}
	}
	want := [][]byte{
		append(frameHeader(frameTypeData, uint32(len(body))), body...),
		frameHeader(typeWindowUpdate, 1<<20),
		frameHeader(frameTypeData, 0),
		frameHeader(frameTypeData, maxCoalescedBody+1), make([]byte, maxCoalescedBody+1),
		append(frameHeader(frameTypeData, 2), "ok"...),
	}
	if len(rec.writes) != len(want) {
		t.Fatalf("%d writes reached the connection, want %d", len(rec.writes), len(want))
	}
	for i := range want {
		if !bytes.Equal(rec.writes[i], want[i]) {
			t.Errorf("write %d: %d bytes %q..., want %d bytes %q...", i, len(rec.writes[i]), rec.writes[i][:frameHeaderSize], len(want[i]), want[i][:frameHeaderSize])
		}
	}
}

func TestMuxConnReadsWhatWasSent(t *testing.T) {
	sent := bytes.Repeat([]byte("0123456789"), 20000)
	c := newMuxConn(&writeRecorder{Reader: bytes.NewReader(sent)})
	got, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(got, sent) {
		t.Fatalf("read %d bytes (%v), want the %d sent", len(got), err, len(sent))
	}
}
