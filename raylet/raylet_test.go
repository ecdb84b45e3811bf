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

// startRayletCalledByGCS starts a GCS and a raylet of cpus CPUs, and a client of the
// raylet whose calls carry the epoch *epoch (the GCS's at first). All stop at cleanup.
func startRayletCalledByGCS(t *testing.T, cpus float64) (g *gcs.Server, r *Raylet, client pb.NodeManagerServiceClient, epoch *int64) {
	t.Helper()
	g = startTestGCS(t)
	cfg := DefaultConfig()
	cfg.GCSAddress = g.Address()
	cfg.Resources = map[string]float64{"CPU": cpus}
	r, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	epoch = new(int64)
	*epoch = g.Epoch()
	conn, err := rpcutil.Dial(r.Address(), rpcutil.DialOptions{Epoch: func() int64 { return *epoch }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return g, r, pb.NewNodeManagerServiceClient(conn), epoch
}

// A group on one node is prepared and committed in one call (PrepareBundleResources with
// commit): the call keeps the two phases' guarantees. Sent again it holds the bundle
// once; a late call of an older generation, or from an older GCS epoch, is refused and
// changes nothing; a cancel releases it.
func TestPrepareAndCommitInOneCallIsIdempotentAndFenced(t *testing.T) {
	g, r, client, epoch := startRayletCalledByGCS(t, 4)
	ctx := context.Background()
	oneCall := func(generation int64, cpus float64) error {
		_, err := client.PrepareBundleResources(ctx, &pb.PrepareBundleResourcesRequest{Commit: true, Bundles: []*pb.BundleReservation{
			{Key: key("one", 0, generation), Resources: map[string]float64{"CPU": cpus}},
		}})
		return err
	}
	available := func() float64 { return r.Node().ResourcesAvailable["CPU"] }
	for attempt := range 3 { // a retried call holds the bundle once
		if err := oneCall(1, 1); err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
	}
	if got := available(); got != 3 {
		t.Fatalf("CPU available %v after the same call three times, want 3", got)
	}
	if err := oneCall(2, 2); err != nil { // the group placed again: the newer generation replaces it
		t.Fatal(err)
	}
	if err := oneCall(1, 1); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "stale generation") {
		t.Fatalf("a late call of generation 1 after 2: %v, want FailedPrecondition (stale generation)", err)
	}
	if got := available(); got != 2 {
		t.Fatalf("CPU available %v, want 2 (generation 2 alone)", got)
	}
	// A newer GCS has spoken: the old one's call is refused and holds nothing.
	*epoch = g.Epoch() + 5
	if _, err := client.GetNodeStats(ctx, &pb.GetNodeStatsRequest{}); err != nil {
		t.Fatal(err)
	}
	*epoch = g.Epoch()
	_, err := client.PrepareBundleResources(ctx, &pb.PrepareBundleResourcesRequest{Commit: true, Bundles: []*pb.BundleReservation{
		{Key: key("stale", 0, 1), Resources: map[string]float64{"CPU": 1}},
	}})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "stale GCS epoch") {
		t.Fatalf("one call from an older GCS epoch: %v, want FailedPrecondition (stale GCS epoch)", err)
	}
	if got := available(); got != 2 {
		t.Fatalf("CPU available %v after a refused call, want 2", got)
	}
	*epoch = g.Epoch() + 5
	if _, err := client.CancelResourceReserve(ctx, &pb.CancelResourceReserveRequest{Bundles: []*pb.BundleKey{key("one", 0, 2)}}); err != nil {
		t.Fatal(err)
	}
	if got := available(); got != 4 {
		t.Fatalf("CPU available %v after the cancel, want 4", got)
	}
}

// A removed group's cancel may ride on the next prepare to the same raylet: it is
// applied first (its capacity serves the prepare), also when the prepare is refused, is
// idempotent when the call is sent again, never releases a newer generation, and is
// fenced by the GCS epoch as the call is.
func TestCancelsRidingOnAPrepareAreReleasedFirstIdempotentlyAndFenced(t *testing.T) {
	g, r, client, epoch := startRayletCalledByGCS(t, 4)
	ctx := context.Background()
	oneCall := func(group string, generation int64, cpus float64, cancel ...*pb.BundleKey) (*pb.PrepareBundleResourcesReply, error) {
		return client.PrepareBundleResources(ctx, &pb.PrepareBundleResourcesRequest{Commit: true, Cancel: cancel, Bundles: []*pb.BundleReservation{
			{Key: key(group, 0, generation), Resources: map[string]float64{"CPU": cpus}},
		}})
	}
	available := func() float64 { return r.Node().ResourcesAvailable["CPU"] }
	if _, err := oneCall("a", 1, 3); err != nil {
		t.Fatal(err)
	}
	// b needs a's CPUs: the cancel riding on its call frees them first.
	for attempt := range 2 { // sent again, the call holds b once and a stays released
		reply, err := oneCall("b", 1, 3, key("a", 0, 1))
		if err != nil {
			t.Fatalf("attempt %d: prepare riding a's cancel: %v", attempt, err)
		}
		if got := reply.Resources.ResourcesAvailable["CPU"]; got != 1 {
			t.Fatalf("attempt %d: the reply reports %v CPU available, want 1 (b alone)", attempt, got)
		}
	}
	if got := available(); got != 1 {
		t.Fatalf("CPU available %v, want 1 (b alone)", got)
	}
	// A refused prepare still releases what rode on it.
	if _, err := oneCall("c", 1, 5, key("b", 0, 1)); err == nil {
		t.Fatalf("a bundle larger than the node: %v, want a refusal", err)
	}
	if got := available(); got != 4 {
		t.Fatalf("CPU available %v after a refused prepare carrying b's cancel, want 4", got)
	}
	// A cancel of an older generation leaves the newer one held.
	if _, err := oneCall("d", 2, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := oneCall("e", 1, 1, key("d", 0, 1)); err != nil {
		t.Fatal(err)
	}
	if got := available(); got != 2 {
		t.Fatalf("CPU available %v, want 2 (d's generation 2 and e held)", got)
	}
	// From an older GCS epoch the whole call is refused: the cancel riding on it too.
	*epoch = g.Epoch() + 5
	if _, err := client.GetNodeStats(ctx, &pb.GetNodeStatsRequest{}); err != nil {
		t.Fatal(err)
	}
	*epoch = g.Epoch()
	if _, err := oneCall("f", 1, 1, key("d", 0, 2), key("e", 0, 1)); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "stale GCS epoch") {
		t.Fatalf("a prepare with cancels from an older GCS epoch: %v, want FailedPrecondition (stale GCS epoch)", err)
	}
	if got := available(); got != 2 {
		t.Fatalf("CPU available %v after a refused stale call, want 2 (nothing released)", got)
	}
}
