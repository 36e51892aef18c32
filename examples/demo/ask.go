package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds" // registers the xds:/// resolver and xDS balancers
)

// ask dials xds:///tp2 with a grpc-go xDS client whose node metadata is
// the client's parameters, and returns the name of the backend that
// answers. grpc-go reads one bootstrap per process; the demo gives each
// client its own through grpc-go's resolver builder for a given bootstrap.
func ask(ctx context.Context, xdsAddr string, c client, timeout time.Duration) (string, error) {
	bootstrap, err := json.Marshal(map[string]any{
		"xds_servers": []any{map[string]any{
			"server_uri":      xdsAddr,
			"channel_creds":   []any{map[string]any{"type": "insecure"}},
			"server_features": []string{"xds_v3"},
		}},
		"node": map[string]any{
			"id":       fmt.Sprintf("demo-%s-%s", c.env, c.version),
			"locality": map[string]any{},
			"metadata": map[string]string{"env": c.env, "version": c.version},
		},
	})
	if err != nil {
		return "", err
	}
	r, err := xds.NewXDSResolverWithConfigForTesting(bootstrap)
	if err != nil {
		return "", err
	}
	conn, err := grpc.NewClient("xds:///tp2", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(r))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return callName(ctx, conn)
}
