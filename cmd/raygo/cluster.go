package main

import (
	"context"
	"time"

	"google.golang.org/grpc"

	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// gcsClient is a connection to the GCS for the read-only commands.
type gcsClient struct {
	address string
	conn    *grpc.ClientConn
	nodes   pb.NodeInfoServiceClient
	pgs     pb.PlacementGroupServiceClient
	actors  pb.ActorInfoServiceClient
	// autoscaler is the GCS's AutoscalerStateService (raygo status reads it).
	autoscaler pb.AutoscalerStateServiceClient
}

func dialGCS(addressFlag string) (*gcsClient, error) {
	addr, err := resolveAddress(addressFlag)
	if err != nil {
		return nil, err
	}
	conn, err := rpcutil.Dial(addr, rpcutil.DialOptions{})
	if err != nil {
		return nil, err
	}
	c := &gcsClient{address: addr, conn: conn, nodes: pb.NewNodeInfoServiceClient(conn), pgs: pb.NewPlacementGroupServiceClient(conn),
		actors: pb.NewActorInfoServiceClient(conn), autoscaler: pb.NewAutoscalerStateServiceClient(conn)}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.nodes.GetClusterInfo(ctx, &pb.GetClusterInfoRequest{}); err != nil {
		conn.Close()
		if rpcutil.IsUnavailable(err) {
			return nil, badInput("no GCS answers at %s (set --address or RAYGO_ADDRESS): %v", addr, err)
		}
		return nil, err
	}
	return c, nil
}

func (c *gcsClient) Close() { _ = c.conn.Close() }

func callContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}
