package main

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The backends' one method, Name, answers with the backend's name. It is
// declared here by hand (no .proto), with well-known message types.
const nameMethod = "/xdsd.demo.Backend/Name"

type backendServer struct{ name string }

var backendDesc = grpc.ServiceDesc{
	ServiceName: "xdsd.demo.Backend",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Name",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			if err := dec(new(emptypb.Empty)); err != nil {
				return nil, err
			}
			return wrapperspb.String(srv.(*backendServer).name), nil
		},
	}},
}

// startBackends starts one backend per name on a free loopback port, and
// returns their ports by name.
func startBackends(names []string) (map[string]int, func(), error) {
	ports := map[string]int{}
	var servers []*grpc.Server
	stop := func() {
		for _, s := range servers {
			s.Stop()
		}
	}
	for _, n := range names {
		lis, port, err := freePort()
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("backend %s: %w", n, err)
		}
		s := grpc.NewServer()
		s.RegisterService(&backendDesc, &backendServer{name: n})
		go s.Serve(lis)
		servers = append(servers, s)
		ports[n] = port
	}
	return ports, stop, nil
}

// callName asks whichever backend conn routes to for its name.
func callName(ctx context.Context, conn *grpc.ClientConn) (string, error) {
	var out wrapperspb.StringValue
	if err := conn.Invoke(ctx, nameMethod, &emptypb.Empty{}, &out, grpc.WaitForReady(true)); err != nil {
		return "", err
	}
	return out.GetValue(), nil
}
