//go:build linux

package server

import (
	"context"

	"connectrpc.com/connect"

	pb "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process"
)

func (ps *processService) Connect(ctx context.Context, req *connect.Request[pb.ConnectRequest], stream *connect.ServerStream[pb.ConnectResponse]) error {
	if _, err := ps.s.rpcUser(req.Header()); err != nil {
		return err
	}
	p, err := ps.s.procs.find(req.Msg.GetProcess())
	if err != nil {
		return err
	}
	send := func(ev *pb.ProcessEvent) error { return stream.Send(&pb.ConnectResponse{Event: ev}) }
	sub, end := p.attach()
	if sub != nil {
		defer p.detach(sub)
	}
	if err := send(startEvent(p.pid)); err != nil {
		return err
	}
	if end != nil {
		return send(&pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: end}})
	}
	return streamEvents(ctx, keepaliveInterval(req.Header()), sub, send)
}
