//go:build linux

package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	pb "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process"
)

// processService implements process.Process (design/e2b-api.md "process.proto").
type processService struct {
	s *Server
}

func startEvent(pid uint32) *pb.ProcessEvent {
	return &pb.ProcessEvent{Event: &pb.ProcessEvent_Start{Start: &pb.ProcessEvent_StartEvent{Pid: pid}}}
}

// streamEvents sends the events of sub until the end event, with a keepalive
// after every interval without data. When the stream's context ends first
// the stream detaches (the process keeps running) and ends with the
// context's error: at a Connect-Timeout-Ms deadline that is
// deadline_exceeded without an end event, as in envd, while the deadline
// kills a Start's process (design/envd.md, Lifetime).
func streamEvents(ctx context.Context, interval time.Duration, sub *subscriber, send func(*pb.ProcessEvent) error) error {
	keepalive := time.NewTimer(interval)
	defer keepalive.Stop()
	for {
		select {
		case ev := <-sub.events:
			if ev.GetEnd() != nil && pastDeadline(ctx) {
				// The end of a process the deadline killed races the deadline:
				// the kill's timer may run before the context's.
				if err := ctx.Err(); err != nil {
					return err
				}
				return context.DeadlineExceeded
			}
			if err := send(ev); err != nil {
				return err
			}
			if ev.GetEnd() != nil {
				return nil
			}
			keepalive.Reset(interval)
		case <-keepalive.C:
			if err := send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Keepalive{Keepalive: &pb.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
			keepalive.Reset(interval)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// pastDeadline tells whether ctx has ended or its deadline has come, whether
// or not the context's own timer has run yet.
func pastDeadline(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && !time.Now().Before(deadline)
}

// keepaliveInterval reads Keepalive-Ping-Interval (seconds).
func keepaliveInterval(h http.Header) time.Duration {
	if n, err := strconv.Atoi(h.Get(envd.HeaderKeepalive)); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return defaultKeepalive
}
