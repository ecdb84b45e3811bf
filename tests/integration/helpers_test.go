package integration

import (
	"context"
	"strconv"
	"strings"
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

func cudaString(ids []int) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(id)
	}
	return strings.Join(parts, ",")
}
