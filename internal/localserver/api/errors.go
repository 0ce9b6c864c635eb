package api

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
)

// The one error path of the API: handlers (and the parts behind them)
// return errors of failure's kinds, and writeFailure answers each with the
// status and E2B error body its kind has in answers, as moby's
// httpstatus.FromError does. No handler chooses an error status.

// apiHandler serves one API request: it writes the answer, or returns the
// error that is the answer.
type apiHandler func(w http.ResponseWriter, r *http.Request) error

// handle serves h, answering its error.
func (s *Server) handle(h apiHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			writeFailure(s.log, w, err)
		}
	}
}

// kindAnswer is how the API answers an error of one kind: the status and,
// where E2B sends one, the error_code of its body.
type kindAnswer struct {
	status    int
	errorCode string
}

// answers is the table: every kind of failure and its answer.
var answers = map[failure.Kind]kindAnswer{
	failure.Internal:          {http.StatusInternalServerError, "internal_server_error"},
	failure.Invalid:           {http.StatusBadRequest, ""},
	failure.NotFound:          {http.StatusNotFound, ""},
	failure.Conflict:          {http.StatusConflict, ""},
	failure.Forbidden:         {http.StatusForbidden, ""},
	failure.Unauthorized:      {http.StatusUnauthorized, ""},
	failure.TooLarge:          {http.StatusRequestEntityTooLarge, ""},
	failure.NoSpace:           {http.StatusInsufficientStorage, ""},
	failure.Unavailable:       {http.StatusServiceUnavailable, ""},
	failure.Unreachable:       {http.StatusBadGateway, ""},
	failure.WrongMethod:       {http.StatusMethodNotAllowed, ""},
	failure.SandboxNotStarted: {http.StatusInternalServerError, "sandbox_create_failed"},
}

// writeFailure answers err by its kind, logging the server's own failures
// (their cause, when they have one); a sandbox that did not start is logged
// where it failed, with its template and build.
func writeFailure(log *slog.Logger, w http.ResponseWriter, err error) {
	kind := failure.KindOf(err)
	a, ok := answers[kind]
	if !ok {
		kind, a = failure.Internal, answers[failure.Internal]
	}
	if kind == failure.Internal {
		log.Error("request failed", slog.Any("err", logged(err)))
	}
	writeJSON(w, a.status, e2b.Error{Code: a.status, Message: err.Error(), ErrorCode: a.errorCode})
}

// logged is the failure underneath err when it has one.
func logged(err error) error {
	if e, ok := errors.AsType[*failure.Error](err); ok && e.Cause != nil {
		return e.Cause
	}
	return err
}
