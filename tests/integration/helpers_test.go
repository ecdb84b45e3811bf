package integration

import (
	"context"
	"syscall"

	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

func killPID(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

func harnessNodeStats(ctx context.Context, address string) (*pb.GetNodeStatsReply, error) {
	conn, err := rpcutil.Dial(address, rpcutil.DialOptions{})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return pb.NewNodeManagerServiceClient(conn).GetNodeStats(ctx, &pb.GetNodeStatsRequest{})
}
