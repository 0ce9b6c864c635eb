//go:build linux

package server

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	pb "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process"
)

func (ps *processService) SendInput(_ context.Context, req *connect.Request[pb.SendInputRequest]) (*connect.Response[pb.SendInputResponse], error) {
	if _, err := ps.s.rpcUser(req.Header()); err != nil {
		return nil, err
	}
	p, err := ps.s.procs.findRunning(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.writeInput(req.Msg.GetInput()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.SendInputResponse{}), nil
}

func (ps *processService) StreamInput(_ context.Context, stream *connect.ClientStream[pb.StreamInputRequest]) (*connect.Response[pb.StreamInputResponse], error) {
	if _, err := ps.s.rpcUser(stream.RequestHeader()); err != nil {
		return nil, err
	}
	var p *process
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().(type) {
		case *pb.StreamInputRequest_Start:
			// A later start switches the process, as on envd.
			found, err := ps.s.procs.findRunning(ev.Start.GetProcess())
			if err != nil {
				return nil, err
			}
			p = found
		case *pb.StreamInputRequest_Data:
			if p == nil {
				// envd's handler dereferences no process here and drops the
				// connection: a clear error instead (design/envd.md).
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("the first message must be start"))
			}
			if err := p.writeInput(ev.Data.GetInput()); err != nil {
				return nil, err
			}
		case *pb.StreamInputRequest_Keepalive:
		default:
			return nil, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("invalid event type %T", ev))
		}
	}
	if err := stream.Err(); err != nil {
		return nil, connect.NewError(connect.CodeUnknown, fmt.Errorf("error streaming input: %w", err))
	}
	return connect.NewResponse(&pb.StreamInputResponse{}), nil
}

func (ps *processService) CloseStdin(_ context.Context, req *connect.Request[pb.CloseStdinRequest]) (*connect.Response[pb.CloseStdinResponse], error) {
	if _, err := ps.s.rpcUser(req.Header()); err != nil {
		return nil, err
	}
	p, err := ps.s.procs.findRunning(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.closeStdin(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.CloseStdinResponse{}), nil
}
