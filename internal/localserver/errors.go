package localserver

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// The one error path of the API: handlers (and the methods behind them)
// return an error, and writeFailure answers it with the status and body
// failureAnswer maps it to.

// apiHandler serves one API request: it writes the answer, or returns the
// error that is the answer.
type apiHandler func(w http.ResponseWriter, r *http.Request) error

// handle serves h, answering its error.
func (s *Server) handle(h apiHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeFailure(w, err)
		}
	}
}

// errorAnswer is a failure that chose its answer: the status and the spec's
// error envelope. cause, when set, is the server's own failure, logged when
// answered.
type errorAnswer struct {
	status int
	body   e2b.Error
	cause  error
}

func (e *errorAnswer) Error() string { return e.body.Message }

// answer is the {code, message} answer with status.
func answer(status int, format string, args ...any) error {
	return &errorAnswer{status: status, body: e2b.Error{Code: status, Message: fmt.Sprintf(format, args...)}}
}

// internal is the 500 answer of the server's own failure err, whatever
// kind err has; err is logged when answered.
func internal(err error) *errorAnswer {
	return &errorAnswer{
		status: http.StatusInternalServerError,
		body:   e2b.Error{Code: http.StatusInternalServerError, Message: err.Error(), ErrorCode: "internal_server_error"},
		cause:  err,
	}
}

// notFoundAs answers a store lookup's err where E2B words or codes a
// missing thing otherwise than the store: status and the message when err
// is the store's not-found; any other failure is the server's own (500).
func notFoundAs(err error, status int, format string, args ...any) error {
	if store.KindOf(err) == store.KindNotFound {
		return answer(status, format, args...)
	}
	return internal(err)
}

// failureAnswer maps err to its answer, as moby's httpstatus.FromError: an
// errorAnswer as it is, a store error by its kind, anything else as the
// server's own failure.
func failureAnswer(err error) *errorAnswer {
	if a, ok := errors.AsType[*errorAnswer](err); ok {
		return a
	}
	var status int
	switch store.KindOf(err) {
	case store.KindNotFound:
		status = http.StatusNotFound
	case store.KindInvalid:
		status = http.StatusBadRequest
	case store.KindConflict:
		status = http.StatusConflict
	case store.KindForbidden:
		status = http.StatusForbidden
	default:
		return internal(err)
	}
	return &errorAnswer{status: status, body: e2b.Error{Code: status, Message: err.Error()}}
}

// writeFailure answers err (failureAnswer), logging the server's own failures.
func (s *Server) writeFailure(w http.ResponseWriter, err error) {
	a := failureAnswer(err)
	if a.cause != nil {
		s.log.Error("request failed", slog.Any("err", a.cause))
	}
	writeJSON(w, a.status, a.body)
}
