// Package auth tests the cluster token on real raygo processes on loopback: with
// RAYGO_AUTH_MODE=token, the head generates a token, every endpoint (GCS, raylets,
// workers, gossip) refuses whoever lacks it, and the normal paths work with it. This
// test binary is the SDK driver and, started by the raylets, the workers.
package auth

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/internal/membership"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// Counter is the test actor.
type Counter struct{ n int }

// Add adds d and returns the sum.
func (c *Counter) Add(d int) int { c.n += d; return c.n }

func init() {
	sdk.RegisterTask("square", func(x int) int { return x * x })
	sdk.RegisterActor("Counter", func() *Counter { return &Counter{} })
}

func TestMain(m *testing.M) {
	sdk.ServeIfWorker()
	os.Exit(m.Run())
}

// refused checks that err is the cluster's refusal of a call without its token.
func refused(t *testing.T, what string, err error) {
	t.Helper()
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "RAYGO_AUTH_TOKEN") {
		t.Errorf("%s without the token: %v, want Unauthenticated naming RAYGO_AUTH_TOKEN", what, err)
	}
}

func TestWithAuthOnNothingAnswersWithoutTheToken(t *testing.T) {
	// This process starts with no token anywhere: its own clients are the attacker's.
	t.Setenv("HOME", t.TempDir())
	t.Setenv("RAYGO_AUTH_TOKEN", "")
	t.Setenv("RAYGO_AUTH_TOKEN_PATH", "")
	home := t.TempDir()
	c := harness.StartHeadWithEnv(t, []string{"HOME=" + home, "RAYGO_AUTH_MODE=token"}, "--num-cpus", "4")
	worker := c.AddNode("--num-cpus", "2") // the same HOME: it finds the token the head saved

	// The head generated the token, owner-only.
	tokenFile := filepath.Join(home, ".raygo", "auth_token")
	info, err := os.Stat(tokenFile)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v, want a file of mode 600", tokenFile, info, err)
	}
	raw, _ := os.ReadFile(tokenFile)
	token := strings.TrimSpace(string(raw))
	stdout, stderr, code := harness.Run(t, c.Bin, []string{"get-auth-token"}, "HOME="+home)
	if code != 0 || strings.TrimSpace(stdout) != token {
		t.Fatalf("get-auth-token: exit %d, %q %s; want the saved token", code, stdout, stderr)
	}

	// The CLI without the token is refused with the variable to set; with it, it works.
	_, stderr, code = harness.Run(t, c.Bin, []string{"status", "--address", c.GCSAddress})
	if code == 0 || !strings.Contains(stderr, "RAYGO_AUTH_TOKEN") {
		t.Fatalf("status without the token: exit %d: %s", code, stderr)
	}
	if stdout, stderr, code := harness.Run(t, c.Bin, []string{"status", "--address", c.GCSAddress}, "RAYGO_AUTH_TOKEN="+token); code != 0 {
		t.Fatalf("status with the token: exit %d: %s %s", code, stdout, stderr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := rpcutil.Dial(c.GCSAddress, rpcutil.DialOptions{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	all, err := pb.NewNodeInfoServiceClient(admin).GetAllNodeInfo(ctx, &pb.GetAllNodeInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	rayletAddress := harness.FindNode(all.Nodes, worker.NodeID).GetRayletAddress()
	if state, err := pb.NewAutoscalerStateServiceClient(admin).GetClusterResourceState(ctx, &pb.GetClusterResourceStateRequest{}); err != nil ||
		len(state.ClusterResourceState.NodeStates) != 2 {
		t.Fatalf("GetClusterResourceState with the token: %v, %v; want both nodes", state, err)
	}
	for _, presented := range []string{"", "not-the-token"} {
		gcs, err := rpcutil.Dial(c.GCSAddress, rpcutil.DialOptions{Token: presented})
		if err != nil {
			t.Fatal(err)
		}
		defer gcs.Close()
		nodes := pb.NewNodeInfoServiceClient(gcs)
		// A fake node, and a hijack of a real node's id.
		_, err = nodes.RegisterNode(ctx, &pb.RegisterNodeRequest{Node: &pb.NodeInfo{NodeId: "fake", RayletAddress: "127.0.0.1:1",
			ResourcesTotal: map[string]float64{"GPU": 8}}})
		refused(t, "RegisterNode", err)
		_, err = nodes.RegisterNode(ctx, &pb.RegisterNodeRequest{Node: &pb.NodeInfo{NodeId: worker.NodeID, RayletAddress: "127.0.0.1:1"}})
		refused(t, "RegisterNode of a live node's id", err)
		_, err = nodes.UnregisterNode(ctx, &pb.UnregisterNodeRequest{NodeId: worker.NodeID})
		refused(t, "UnregisterNode", err)
		_, err = pb.NewExecutableServiceClient(gcs).HasExecutable(ctx, &pb.HasExecutableRequest{Sha256: strings.Repeat("0", 64)})
		refused(t, "HasExecutable", err)
		upload, err := pb.NewExecutableServiceClient(gcs).UploadExecutable(ctx)
		if err == nil {
			_ = upload.Send(&pb.ExecutableChunk{Data: []byte("#!/bin/sh\n")})
			_, err = upload.CloseAndRecv()
		}
		refused(t, "UploadExecutable", err)
		_, err = pb.NewActorInfoServiceClient(gcs).CreateActor(ctx, &pb.CreateActorRequest{ClassName: "Counter"})
		refused(t, "CreateActor", err)
		// The autoscaler's service: reading the cluster, request_resources, and a drain
		// that would let an attacker empty a node.
		autoscaler := pb.NewAutoscalerStateServiceClient(gcs)
		_, err = autoscaler.GetClusterResourceState(ctx, &pb.GetClusterResourceStateRequest{})
		refused(t, "GetClusterResourceState", err)
		_, err = autoscaler.RequestClusterResourceConstraint(ctx, &pb.RequestClusterResourceConstraintRequest{})
		refused(t, "RequestClusterResourceConstraint", err)
		_, err = autoscaler.DrainNode(ctx, &pb.AutoscalerDrainNodeRequest{NodeId: worker.NodeID, Reason: pb.DrainNodeReason_DRAIN_NODE_REASON_PREEMPTION})
		refused(t, "DrainNode (autoscaler)", err)

		// The raylet: ghost reservations, cancels behind the GCS's back, a forged epoch.
		raylet, err := rpcutil.Dial(rayletAddress, rpcutil.DialOptions{Token: presented, Epoch: func() int64 { return math.MaxInt64 }})
		if err != nil {
			t.Fatal(err)
		}
		defer raylet.Close()
		manager := pb.NewNodeManagerServiceClient(raylet)
		_, err = manager.PrepareBundleResources(ctx, &pb.PrepareBundleResourcesRequest{Commit: true, Bundles: []*pb.BundleReservation{{
			Key: &pb.BundleKey{PlacementGroupId: "ghost", Generation: 1}, Resources: map[string]float64{"CPU": 1}}}})
		refused(t, "PrepareBundleResources with a forged epoch", err)
		_, err = manager.CancelResourceReserve(ctx, &pb.CancelResourceReserveRequest{Bundles: []*pb.BundleKey{{PlacementGroupId: "any"}}})
		refused(t, "CancelResourceReserve", err)
		_, err = manager.RequestWorkerLease(ctx, &pb.RequestWorkerLeaseRequest{JobId: "01000000"})
		refused(t, "RequestWorkerLease", err)
		_, err = manager.GetNodeStats(ctx, &pb.GetNodeStatsRequest{})
		refused(t, "GetNodeStats", err)
	}

	// A member without the gossip key cannot join.
	clusterInfo, err := pb.NewNodeInfoServiceClient(admin).GetClusterInfo(ctx, &pb.GetClusterInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	rogue, err := membership.Start(membership.Config{Name: worker.NodeID, BindIP: "127.0.0.1", Meta: membership.Meta{Kind: "raylet", NodeID: worker.NodeID}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rogue.Shutdown()
	if n, err := rogue.Join([]string{clusterInfo.GossipAddress}); err == nil || n > 0 {
		t.Errorf("a gossip member without the key joined (%d, %v)", n, err)
	}

	// With the token: a group, a task and an actor, whose workers require it too.
	client, pg := spreadGroup(t, ctx, c.GCSAddress, token, "a group on the nodes after the forged calls")
	runTask(t, ctx, client, pg, 0, "a task with the token")
	counter := callActor(t, ctx, client, pg, 1, "an actor call with the token")
	actor, err := counter.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	workerConn, err := rpcutil.Dial(actor.Address, rpcutil.DialOptions{Token: "not-the-token"})
	if err != nil {
		t.Fatal(err)
	}
	defer workerConn.Close()
	_, err = pb.NewCoreWorkerServiceClient(workerConn).PushTask(ctx, &pb.PushTaskRequest{ActorId: actor.ID, FunctionName: "Add"})
	refused(t, "PushTask to an actor's worker", err)
}

// spreadGroup connects the SDK with token and makes a ready STRICT_SPREAD group of two
// one-CPU bundles: one on each of two nodes.
func spreadGroup(t *testing.T, ctx context.Context, address, token, what string) (*sdk.Client, *sdk.PlacementGroup) {
	t.Helper()
	t.Setenv("RAYGO_AUTH_TOKEN", token)
	client, err := sdk.Connect(ctx, sdk.Options{Address: address})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	pg, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}, {"CPU": 1}}, sdk.StrictSpread)
	if err == nil {
		_, err = pg.Ready(ctx)
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return client, pg
}

// runTask runs square(3) in the group's bundle and checks it returns 9.
func runTask(t *testing.T, ctx context.Context, client *sdk.Client, pg *sdk.PlacementGroup, bundle int, what string) {
	t.Helper()
	var nine int
	ref, err := client.Submit(ctx, "square", sdk.Args(3), sdk.InPlacementGroup(pg, bundle))
	if err == nil {
		err = sdk.Get(ctx, ref, &nine)
	}
	if err != nil || nine != 9 {
		t.Fatalf("%s: %d %v", what, nine, err)
	}
}

// callActor creates a Counter in the group's bundle, checks a call of Add returns 1, and
// returns the actor.
func callActor(t *testing.T, ctx context.Context, client *sdk.Client, pg *sdk.PlacementGroup, bundle int, what string) *sdk.Actor {
	t.Helper()
	counter, err := client.CreateActor(ctx, "Counter", nil, sdk.InPlacementGroup(pg, bundle))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var one int
	ref, err := counter.Call(ctx, "Add", 1)
	if err == nil {
		err = sdk.Get(ctx, ref, &one)
	}
	if err != nil || one != 1 {
		t.Fatalf("%s: %d %v", what, one, err)
	}
	return counter
}
