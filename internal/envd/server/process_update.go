//go:build linux

package server

import (
	"context"

	"connectrpc.com/connect"

	pb "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process"
)

func (ps *processService) Update(_ context.Context, req *connect.Request[pb.UpdateRequest]) (*connect.Response[pb.UpdateResponse], error) {
	if _, err := ps.s.rpcUser(req.Header()); err != nil {
		return nil, err
	}
	p, err := ps.s.procs.findRunning(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if req.Msg.GetPty() != nil {
		if err := p.resize(req.Msg.GetPty().GetSize()); err != nil {
			return nil, err
		}
	}
	return connect.NewResponse(&pb.UpdateResponse{}), nil
}
