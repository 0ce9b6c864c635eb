// Package failure is the local server's vocabulary of what went wrong: the
// few kinds of error its parts return (the store, the sandbox and build
// managers, the handlers), as moby's errdefs. The API maps each kind to one
// HTTP status and E2B error body in one table (api/errors.go); nothing
// below the API chooses a status.
package failure

import (
	"errors"
	"fmt"
)

// Kind says what went wrong, in the terms a client acts on. Adding a kind
// means adding its row to the API's table: are you sure one of these does
// not fit?
type Kind int

// The kinds. Internal is the zero value: an error of no kind is the
// server's own failure.
const (
	// Internal is the server's own failure; the client cannot fix it.
	Internal Kind = iota
	// Invalid is a request that breaks a rule (a bad name, timeout, body).
	Invalid
	// NotFound is a missing template, build, tag, sandbox or route.
	NotFound
	// Conflict is a request the current state refuses (a sandbox already
	// paused, a build already started).
	Conflict
	// Forbidden is a request the state never allows (a tag on another
	// team's template).
	Forbidden
	// Unauthorized is a request without the server's API key.
	Unauthorized
	// TooLarge is an upload past the server's limit.
	TooLarge
	// NoSpace is a write the server's disk has no room for.
	NoSpace
	// Unavailable is a request the server cannot take now (it is shutting
	// down).
	Unavailable
	// Unreachable is sandbox traffic that cannot reach its port.
	Unreachable
	// WrongMethod is a request with a method its path does not take.
	WrongMethod
	// SandboxNotStarted is a sandbox whose container did not start: the
	// server's failure, which E2B codes apart.
	SandboxNotStarted
)

// Error is an error of a kind whose message is fit to show an API client.
// Cause, when set, is the failure underneath, logged by the API and not
// shown.
type Error struct {
	Kind    Kind
	Message string
	Cause   error
}

func (e *Error) Error() string { return e.Message }

func (e *Error) Unwrap() error { return e.Cause }

// New is an error of kind with the message format makes of args.
func New(kind Kind, format string, args ...any) error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// Wrap is err said as an error of kind, its message prefixed by what, err
// kept as the cause.
func Wrap(kind Kind, what string, err error) error {
	return &Error{Kind: kind, Message: what + ": " + err.Error(), Cause: err}
}

// OwnFailure is err as the server's own failure whatever kind it has, so
// that a lookup's invalid or missing answer inside another request is not
// taken for the client's mistake.
func OwnFailure(err error) error {
	return &Error{Kind: Internal, Message: err.Error(), Cause: err}
}

// KindOf is the kind of err: Internal for an error of no kind.
func KindOf(err error) Kind {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Kind
	}
	return Internal
}

// MissingAs says a lookup's not-found err where the API words or codes the
// missing thing otherwise: kind with the message format makes of args.
// Any other failure of the lookup is the server's own.
func MissingAs(err error, kind Kind, format string, args ...any) error {
	if KindOf(err) == NotFound {
		return New(kind, format, args...)
	}
	return OwnFailure(err)
}
