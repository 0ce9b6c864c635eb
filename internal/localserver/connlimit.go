package localserver

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Bounds of the server's clients (request bodies have their own deadline,
// api.Config.BodyReadTimeout).
const (
	DefaultMaxConnections    = 512
	DefaultIdleTimeout       = 60 * time.Second
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	// evictNewAfter is how long a connection may stay without a first
	// request before it may be closed for a new one when the server is full.
	evictNewAfter = 250 * time.Millisecond
)

// connLimiter caps the open connections of a listener. When the cap is
// reached, the oldest connection that is idle between requests (or has
// sent nothing for evictNewAfter) is closed to make room; when none is,
// Accept waits for a connection to end. Hijacked connections (upgrades)
// count until they are closed.
type connLimiter struct {
	net.Listener
	max int

	mu    sync.Mutex
	conns map[*limitedConn]*connInfo
	freed chan struct{} // signalled when a connection ends
}

type connInfo struct {
	state http.ConnState
	since time.Time
}

type limitedConn struct {
	net.Conn
	l    *connLimiter
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.forget(c) })
	return err
}

func newConnLimiter(ln net.Listener, limit int) *connLimiter {
	return &connLimiter{Listener: ln, max: limit, conns: map[*limitedConn]*connInfo{}, freed: make(chan struct{}, 1)}
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for !l.makeRoom() {
		select {
		case <-l.freed:
		case <-time.After(evictNewAfter / 4):
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	lc := &limitedConn{Conn: c, l: l}
	l.mu.Lock()
	l.conns[lc] = &connInfo{state: http.StateNew, since: time.Now()}
	l.mu.Unlock()
	return lc, nil
}

// makeRoom reports whether a connection may be accepted, closing the
// oldest evictable one when the cap is reached.
func (l *connLimiter) makeRoom() bool {
	l.mu.Lock()
	if len(l.conns) < l.max {
		l.mu.Unlock()
		return true
	}
	var victim *limitedConn
	var oldest time.Time
	now := time.Now()
	for c, info := range l.conns {
		evictable := info.state == http.StateIdle || (info.state == http.StateNew && now.Sub(info.since) >= evictNewAfter)
		if evictable && (victim == nil || info.since.Before(oldest)) {
			victim, oldest = c, info.since
		}
	}
	l.mu.Unlock()
	if victim == nil {
		return false
	}
	victim.Close()
	return true
}

func (l *connLimiter) forget(c *limitedConn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	select {
	case l.freed <- struct{}{}:
	default:
	}
}

// connState is the http.Server's ConnState hook.
func (l *connLimiter) connState(c net.Conn, st http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	info, ok := l.conns[lc]
	if !ok {
		return
	}
	switch st {
	case http.StateClosed:
		// Close (through limitedConn) forgets it.
	default:
		info.state, info.since = st, time.Now()
	}
}
