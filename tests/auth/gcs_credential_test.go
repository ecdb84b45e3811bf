package auth

import (
	"context"
	"fmt"
	"math"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/raygo-dev/raygo/internal/rpcutil"
	"github.com/raygo-dev/raygo/internal/testutil/redisserver"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// gcsOnly is the refusal of a raylet call that only the GCS's own credential reaches.
const gcsOnly = "GCS's own credential"

// heldBundles returns the placement groups whose bundles the raylet at conn holds, read
// with GetNodeStats (which the cluster token may call), and the raylet's GCS epoch.
func heldBundles(ctx context.Context, conn *grpc.ClientConn) (map[string]pb.BundleReservationState, int64, error) {
	stats, err := pb.NewNodeManagerServiceClient(conn).GetNodeStats(ctx, &pb.GetNodeStatsRequest{})
	if err != nil {
		return nil, 0, err
	}
	held := map[string]pb.BundleReservationState{}
	for _, b := range stats.Bundles {
		held[b.Key.GetPlacementGroupId()] = b.State
	}
	return held, stats.GcsEpoch, nil
}

// The cluster token (an admin's, a driver's) does not reach a raylet's 2PC, drains, a
// job's worker kill nor any call carrying a GCS epoch: only the GCS's own credential,
// which it keeps in its store, does. The GCS's calls keep working, also after the GCS is
// SIGKILLed and restarts from Redis (AOF): a group made after the restart is placed on
// the raylets, which never re-registered, and its removal is released there. Drivers'
// worker leases still take the cluster token.
func TestRayletsTakeThe2PCFromTheGCSAlone(t *testing.T) {
	redis := redisserver.Start(t)
	c, admin := startAuthHead(t, nil, "--num-cpus", "2", "--store", "redis", "--redis-address", redis.Addr, "--redis-namespace", "gcs-credential")
	worker := c.AddNode("--num-cpus", "2") // started with the cluster token (the head's HOME)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	client, pg := spreadGroup(t, ctx, c.GCSAddress, admin, "a group across the head and the worker")
	runTask(t, ctx, client, pg, 0, "a task leased with the cluster token")
	all, err := pb.NewNodeInfoServiceClient(dialWith(t, c.GCSAddress, admin)).GetAllNodeInfo(ctx, &pb.GetAllNodeInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	rayletAddress := harness.FindNode(all.Nodes, worker.NodeID).GetRayletAddress()
	adminRaylet := dialWith(t, rayletAddress, admin)
	forged, err := rpcutil.Dial(rayletAddress, rpcutil.DialOptions{Token: admin, Epoch: func() int64 { return math.MaxInt64 }})
	if err != nil {
		t.Fatal(err)
	}
	defer forged.Close()
	held, epochBefore, err := heldBundles(ctx, adminRaylet)
	if err != nil || held[pg.ID] != pb.BundleReservationState_BUNDLE_COMMITTED {
		t.Fatalf("the worker's bundles: %v %v; want %s committed", held, err, pg.ID)
	}

	for name, conn := range map[string]*grpc.ClientConn{"the cluster token": adminRaylet, "the cluster token and a forged epoch": forged} {
		manager := pb.NewNodeManagerServiceClient(conn)
		_, err := manager.PrepareBundleResources(ctx, &pb.PrepareBundleResourcesRequest{Commit: true, Bundles: []*pb.BundleReservation{{
			Key: &pb.BundleKey{PlacementGroupId: "ghost", Generation: 1}, Resources: map[string]float64{"CPU": 1}}}})
		denied(t, "PrepareBundleResources with "+name, err, gcsOnly)
		_, err = manager.CommitBundleResources(ctx, &pb.CommitBundleResourcesRequest{Bundles: []*pb.BundleKey{{PlacementGroupId: "ghost", Generation: 1}}})
		denied(t, "CommitBundleResources with "+name, err, gcsOnly)
		_, err = manager.CancelResourceReserve(ctx, &pb.CancelResourceReserveRequest{Bundles: []*pb.BundleKey{{PlacementGroupId: pg.ID, BundleIndex: 1, Generation: math.MaxInt64}}})
		denied(t, "CancelResourceReserve with "+name, err, gcsOnly)
		_, err = manager.ReleaseUnusedBundles(ctx, &pb.ReleaseUnusedBundlesRequest{})
		denied(t, "ReleaseUnusedBundles with "+name, err, gcsOnly)
		_, err = manager.DrainRaylet(ctx, &pb.DrainRayletRequest{Reason: "attack"})
		denied(t, "DrainRaylet with "+name, err, gcsOnly)
		_, err = manager.KillJobWorkers(ctx, &pb.KillJobWorkersRequest{JobId: client.JobID()})
		denied(t, "KillJobWorkers with "+name, err, gcsOnly)
	}
	// Any call with an epoch is the GCS's, even one the cluster token may make without.
	_, err = pb.NewNodeManagerServiceClient(forged).GetNodeStats(ctx, &pb.GetNodeStatsRequest{})
	denied(t, "GetNodeStats with the cluster token and a forged epoch", err, gcsOnly)
	_, err = pb.NewNodeManagerServiceClient(forged).RequestWorkerLease(ctx, &pb.RequestWorkerLeaseRequest{JobId: client.JobID()})
	denied(t, "RequestWorkerLease with the cluster token and a forged epoch", err, gcsOnly)

	held, epochAfter, err := heldBundles(ctx, adminRaylet)
	if err != nil || held[pg.ID] != pb.BundleReservationState_BUNDLE_COMMITTED || held["ghost"] != 0 {
		t.Errorf("the worker's bundles after the refused calls: %v %v; want %s still committed and no ghost", held, err, pg.ID)
	}
	if epochAfter != epochBefore {
		t.Errorf("the raylet's GCS epoch went from %d to %d: a refused call's epoch was observed", epochBefore, epochAfter)
	}
	runTask(t, ctx, client, pg, 1, "a task after the refused calls (the node is not draining)")

	// The GCS restarts from Redis with the credential it kept: the raylets, which do not
	// register again (the GCS knows them), still take its calls.
	if err := syscall.Kill(c.Head.ReadRecord(t).GCSPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	groups := pb.NewPlacementGroupServiceClient(dialWith(t, c.GCSAddress, admin))
	harness.Eventually(t, 40*time.Second, "the restarted GCS answers", func() error {
		_, err := groups.GetAllPlacementGroup(ctx, &pb.GetAllPlacementGroupRequest{})
		return err
	})
	if reply, err := groups.GetPlacementGroup(ctx, &pb.GetPlacementGroupRequest{PlacementGroupId: pg.ID}); err != nil ||
		reply.PlacementGroup.GetState() != pb.PlacementGroupState_CREATED {
		t.Errorf("the group made before the restart: %v %v; want CREATED", reply, err)
	}
	again, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}, {"CPU": 1}}, sdk.StrictSpread)
	if err == nil {
		_, err = again.Ready(ctx)
	}
	if err != nil {
		t.Fatalf("a group across both nodes after the GCS restart: %v", err)
	}
	if held, _, err := heldBundles(ctx, adminRaylet); err != nil || held[again.ID] != pb.BundleReservationState_BUNDLE_COMMITTED {
		t.Errorf("the worker's bundles after the restart: %v %v; want %s committed", held, err, again.ID)
	}
	runTask(t, ctx, client, again, 1, "a task in the group made after the restart")
	if err := again.Remove(ctx); err != nil {
		t.Fatalf("remove the group made after the restart: %v", err)
	}
	harness.Eventually(t, 30*time.Second, "the removal released on the worker's raylet", func() error {
		held, _, err := heldBundles(ctx, adminRaylet)
		if err != nil {
			return err
		}
		if _, ok := held[again.ID]; ok {
			return fmt.Errorf("the raylet still holds %s: %v", again.ID, held)
		}
		return nil
	})
}
