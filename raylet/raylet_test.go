package raylet

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/gcs"
	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// The raylet refuses requests stamped with an older GCS epoch than it has seen.
func TestRayletFencesStaleGCSEpochs(t *testing.T) {
	g := startTestGCS(t)
	cfg := DefaultConfig()
	cfg.GCSAddress = g.Address()
	cfg.Resources = map[string]float64{"CPU": 2, "custom": 0.12345}
	cfg.Labels = map[string]string{"zone": "a"}
	r, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()

	call := func(epoch int64) error {
		conn, err := rpcutil.Dial(r.Address(), rpcutil.DialOptions{Epoch: func() int64 { return epoch }})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, err = pb.NewNodeManagerServiceClient(conn).DrainRaylet(context.Background(), &pb.DrainRayletRequest{})
		return err
	}
	if err := call(g.Epoch()); err != nil {
		t.Fatalf("request at the current epoch refused: %v", err)
	}
	if err := call(g.Epoch() + 5); err != nil {
		t.Fatalf("request from a newer GCS refused: %v", err)
	}
	err = call(g.Epoch())
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "stale GCS epoch") {
		t.Fatalf("request from an older epoch after a newer one: %v, want FailedPrecondition", err)
	}

	node := r.Node()
	if node.ResourcesTotal["CPU"] != 2 || node.ResourcesTotal["custom"] != 0.1235 {
		t.Errorf("resources %v: want CPU 2 and custom rounded to 1/10000 (0.1235)", node.ResourcesTotal)
	}
	if node.Labels[nodelabel.NodeID] != r.NodeID() || node.Labels["zone"] != "a" {
		t.Errorf("labels %v", node.Labels)
	}
	if _, ok := node.Labels[nodelabel.AcceleratorType]; ok {
		t.Errorf("accelerator-type label on a node without GPUs: %v", node.Labels)
	}
}

// startTestGCS starts an in-process GCS on the memory store; it stops at cleanup.
func startTestGCS(t *testing.T) *gcs.Server {
	t.Helper()
	gcfg := gcs.DefaultConfig()
	gcfg.Port, gcfg.Store = 0, store.NewMemory()
	g, err := gcs.Start(context.Background(), gcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	return g
}
