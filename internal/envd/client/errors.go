package client

import (
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"
)

// UserError means envd answered unauthenticated: the user named in the
// request does not exist in the sandbox, or the access token is wrong. It
// unwraps to the *connect.Error.
type UserError struct {
	Op   string // what was attempted, e.g. `run "ls"`
	User string // the requested user; empty when envd's default user was meant
	Err  error
}

func (e *UserError) Error() string {
	if e.User == "" {
		return fmt.Sprintf("%s: envd refused the request (is the access token right?): %v", e.Op, e.Err)
	}
	return fmt.Sprintf("%s: envd refused user %q: no such user in the sandbox, or a wrong access token: %v", e.Op, e.User, e.Err)
}

func (e *UserError) Unwrap() error { return e.Err }

// CwdError means envd could not use the requested working directory (it
// answers invalid_argument "cwd '<p>' does not exist"). It unwraps to the
// *connect.Error.
type CwdError struct {
	Op  string
	Cwd string
	Err error
}

func (e *CwdError) Error() string {
	return fmt.Sprintf("%s: working directory %q does not exist in the sandbox: %v", e.Op, e.Cwd, e.Err)
}

func (e *CwdError) Unwrap() error { return e.Err }

// ProcessError means the process did not exit normally: envd's end event
// said exited=false (killed by a signal, for instance). A non-zero exit code
// is not a ProcessError; Run reports it in RunResult.ExitCode.
type ProcessError struct {
	Op       string
	ExitCode int    // -1 after a signal
	Status   string // e.g. "signal: killed"
	Message  string // envd's error text, if any
	// Result is what was captured up to the end (the same value Run returns).
	Result *RunResult
}

func (e *ProcessError) Error() string {
	msg := fmt.Sprintf("%s: the process did not exit normally (status %q, exit code %d)", e.Op, e.Status, e.ExitCode)
	if e.Message != "" && e.Message != e.Status {
		msg += ": " + e.Message
	}
	return msg
}

// HTTPError is a non-success answer of one of envd's plain HTTP endpoints
// (/files, /health, /init), with the message of its JSON error body.
type HTTPError struct {
	Op         string
	StatusCode int
	Message    string
}

func (e *HTTPError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("%s: envd answered HTTP %d", e.Op, e.StatusCode)
	}
	return fmt.Sprintf("%s: envd answered HTTP %d: %s", e.Op, e.StatusCode, e.Message)
}

// rpcError gives an RPC failure the context of the operation and turns the
// codes a caller can act on into the typed errors above.
func rpcError(op, user string, err error) error {
	if connect.CodeOf(err) == connect.CodeUnauthenticated {
		return &UserError{Op: op, User: user, Err: err}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// startError is rpcError for Start, which also reports a missing cwd.
func startError(op string, req *RunRequest, err error) error {
	var ce *connect.Error
	if req.Cwd != "" && errors.As(err, &ce) && ce.Code() == connect.CodeInvalidArgument &&
		strings.Contains(ce.Message(), "cwd") {
		return &CwdError{Op: op, Cwd: req.Cwd, Err: err}
	}
	return rpcError(op, req.User, err)
}
