//go:build linux

package server

import (
	"context"

	"connectrpc.com/connect"

	pb "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process"
)

func (ps *processService) List(_ context.Context, req *connect.Request[pb.ListRequest]) (*connect.Response[pb.ListResponse], error) {
	if _, err := ps.s.rpcUser(req.Header()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.ListResponse{Processes: ps.s.procs.list()}), nil
}
