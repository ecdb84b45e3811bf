package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	internalauth "github.com/raygo-dev/raygo/internal/auth"
	"github.com/raygo-dev/raygo/internal/membership"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/tests/harness"
)

// The attacks of issue 14, one test each, on one cluster the package shares: a head
// and a worker with RAYGO_AUTH_MODE=token, and a STRICT_SPREAD group with a bundle
// committed on each. Each test tries its attack as each attacker (no token, a wrong
// token, a tenant's queue-scoped token), checks the refusal, and checks the cluster is
// as before: the worker ALIVE at its address, the group CREATED, its bundle committed
// on the worker's raylet, the raylet on the GCS's epoch.

// attackedCluster is the shared cluster; TestMain closes it.
var attackedCluster harness.Shared[*attacked]

type attacked struct {
	c      *harness.Cluster
	home   string // the head's HOME, where it saved the token it generated
	worker *harness.Node
	// admin is the cluster token; tenant a token of scope queue:a; node one of scope node.
	admin, tenant, node string
	adminConn           *grpc.ClientConn
	rayletAddress       string // the worker's raylet
	group               string // the STRICT_SPREAD group
}

// attacker is who tries an attack: the token it presents.
type attacker struct {
	name, token string
}

// cluster returns the shared cluster, starting it on the first call. The test process
// then has no token anywhere: its clients are the attacker's.
func cluster(t *testing.T) *attacked {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	t.Setenv("RAYGO_AUTH_TOKEN", "")
	t.Setenv("RAYGO_AUTH_TOKEN_PATH", "")
	return attackedCluster.Get(t, "the shared cluster with auth on", startAttacked)
}

func startAttacked(tb testing.TB) *attacked {
	a := &attacked{home: tb.TempDir()}
	a.c = harness.StartHeadWithEnv(tb, []string{"HOME=" + a.home, "RAYGO_AUTH_MODE=token"}, "--num-cpus", "8")
	a.worker = a.c.AddNode("--num-cpus", "8") // the same HOME: it finds the token the head saved
	a.admin = harness.HeadToken(tb, a.home)
	a.tenant = issue(tb, a.c, a.admin, "queue:a")
	a.node = issue(tb, a.c, a.admin, "node")
	a.adminConn = dialWith(tb, a.c.GCSAddress, a.admin)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	all, err := pb.NewNodeInfoServiceClient(a.adminConn).GetAllNodeInfo(ctx, &pb.GetAllNodeInfoRequest{})
	if err != nil {
		tb.Fatal(err)
	}
	a.rayletAddress = harness.FindNode(all.Nodes, a.worker.NodeID).GetRayletAddress()
	a.group = a.createSpreadGroup(tb, ctx, 1)
	return a
}

// createSpreadGroup makes, with the cluster token, a detached STRICT_SPREAD group of two
// bundles of cpu CPUs (one on each node) and waits until it is CREATED.
func (a *attacked) createSpreadGroup(tb testing.TB, ctx context.Context, cpu float64) string {
	tb.Helper()
	bundle := &pb.CreatePlacementGroupRequest_BundleSpec{Resources: map[string]float64{"CPU": cpu}}
	reply, err := pb.NewPlacementGroupServiceClient(a.adminConn).CreatePlacementGroup(ctx, &pb.CreatePlacementGroupRequest{
		Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{bundle, bundle}, Strategy: "STRICT_SPREAD", Lifetime: "detached"})
	if err != nil {
		tb.Fatal(err)
	}
	id := reply.PlacementGroup.GetPlacementGroupId()
	harness.Eventually(tb, time.Minute, "the group "+id+" CREATED", func() error {
		if state := a.groupState(tb, ctx, id); state != pb.PlacementGroupState_CREATED {
			return fmt.Errorf("state %s", state)
		}
		return nil
	})
	return id
}

func (a *attacked) groupState(tb testing.TB, ctx context.Context, id string) pb.PlacementGroupState {
	tb.Helper()
	reply, err := pb.NewPlacementGroupServiceClient(a.adminConn).GetPlacementGroup(ctx, &pb.GetPlacementGroupRequest{PlacementGroupId: id})
	if err != nil {
		tb.Fatal(err)
	}
	return reply.PlacementGroup.GetState()
}

// attackers are who try each attack.
func (a *attacked) attackers() []attacker {
	return []attacker{{"no token", ""}, {"a wrong token", "not-the-token"}, {"a tenant token", a.tenant}}
}

// gcsRefuses checks the GCS's refusal of a call that needs a node (or admin) token.
func (w attacker) gcsRefuses(t *testing.T, what string, err error) {
	t.Helper()
	if w.token == "" || w.token == "not-the-token" {
		refused(t, what, err)
	} else {
		denied(t, what+" with a tenant token", err, "node token")
	}
}

// rayletRefuses checks a raylet's refusal: without a token it knows, Unauthenticated; a
// tenant's token, which the raylet knows through the GCS, PermissionDenied naming want.
func (w attacker) rayletRefuses(t *testing.T, what string, err error, want string) {
	t.Helper()
	if w.token == "" || w.token == "not-the-token" {
		refused(t, what, err)
	} else {
		denied(t, what+" with a tenant token", err, want)
	}
}

// dial connects to addr with the attacker's token (and epoch, when not zero).
func (w attacker) dial(t *testing.T, addr string, epoch int64) *grpc.ClientConn {
	t.Helper()
	options := rpcutil.DialOptions{Token: w.token}
	if epoch != 0 {
		options.Epoch = func() int64 { return epoch }
	}
	conn, err := rpcutil.Dial(addr, options)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func attackContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// unchanged checks the cluster is as the attacks found it: the worker ALIVE at its own
// raylet address and not draining, the shared group CREATED with its bundle committed on
// the worker's raylet, and that raylet on the GCS's epoch.
func (a *attacked) unchanged(t *testing.T, ctx context.Context) {
	t.Helper()
	all, err := pb.NewNodeInfoServiceClient(a.adminConn).GetAllNodeInfo(ctx, &pb.GetAllNodeInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	worker := harness.FindNode(all.Nodes, a.worker.NodeID)
	if worker.GetState() != pb.NodeState_ALIVE || worker.GetRayletAddress() != a.rayletAddress || worker.GetIsDraining() {
		t.Errorf("the worker after the attack: %v; want ALIVE at %s, not draining", worker, a.rayletAddress)
	}
	if len(all.Nodes) != 2 {
		t.Errorf("the cluster after the attack has %d nodes, want the head and the worker", len(all.Nodes))
	}
	if state := a.groupState(t, ctx, a.group); state != pb.PlacementGroupState_CREATED {
		t.Errorf("the group after the attack: %s, want CREATED", state)
	}
	stats := a.workerStats(t, ctx)
	committed := false
	for _, b := range stats.Bundles {
		if b.Key.GetPlacementGroupId() == a.group && b.State == pb.BundleReservationState_BUNDLE_COMMITTED {
			committed = true
		}
	}
	if !committed {
		t.Errorf("the worker's raylet after the attack holds %v; want the group's bundle committed", stats.Bundles)
	}
	info, err := pb.NewNodeInfoServiceClient(a.adminConn).GetClusterInfo(ctx, &pb.GetClusterInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if stats.GcsEpoch != info.GcsEpoch {
		t.Errorf("the worker's raylet is on epoch %d after the attack, the GCS on %d", stats.GcsEpoch, info.GcsEpoch)
	}
}

// workerStats is the worker's raylet's view, asked with the cluster token.
func (a *attacked) workerStats(t *testing.T, ctx context.Context) *pb.GetNodeStatsReply {
	t.Helper()
	stats, err := pb.NewNodeManagerServiceClient(dialWith(t, a.rayletAddress, a.admin)).GetNodeStats(ctx, &pb.GetNodeStatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return stats
}

// Remote code execution: upload an executable to the GCS and create an actor that runs
// it on a raylet. Without the token neither call is answered; a tenant may run code, but
// only in its own namespace, not in another tenant's.
func TestUploadingAnExecutableAndCreatingAnActorIsRefused(t *testing.T) {
	a := cluster(t)
	ctx := attackContext(t)
	payload := []byte("#!/bin/sh\necho owned > /tmp/owned\n")
	sum := sha256.Sum256(payload)
	actorsBefore, err := pb.NewActorInfoServiceClient(a.adminConn).GetAllActorInfo(ctx, &pb.GetAllActorInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range a.attackers() {
		t.Run(w.name, func(t *testing.T) {
			gcs := w.dial(t, a.c.GCSAddress, 0)
			upload, err := pb.NewExecutableServiceClient(gcs).UploadExecutable(ctx)
			if err == nil {
				_ = upload.Send(&pb.ExecutableChunk{Sha256: hex.EncodeToString(sum[:]), Size: int64(len(payload)), Data: payload})
				_, err = upload.CloseAndRecv()
			}
			actors := pb.NewActorInfoServiceClient(gcs)
			if w.token == a.tenant {
				if err != nil {
					t.Errorf("a tenant uploads its executable: %v", err)
				}
				_, err = actors.CreateActor(ctx, &pb.CreateActorRequest{ClassName: "Counter", Namespace: "b", IsDetached: true, ExecutableSha256: hex.EncodeToString(sum[:])})
				denied(t, "a tenant creates an actor in another tenant's namespace", err, "namespace")
				return
			}
			refused(t, "UploadExecutable", err)
			_, err = pb.NewExecutableServiceClient(gcs).HasExecutable(ctx, &pb.HasExecutableRequest{Sha256: hex.EncodeToString(sum[:])})
			refused(t, "HasExecutable", err)
			_, err = actors.CreateActor(ctx, &pb.CreateActorRequest{ClassName: "Counter", ExecutableSha256: hex.EncodeToString(sum[:])})
			refused(t, "CreateActor", err)
		})
	}
	actorsAfter, err := pb.NewActorInfoServiceClient(a.adminConn).GetAllActorInfo(ctx, &pb.GetAllActorInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(actorsAfter.Actors) != len(actorsBefore.Actors) {
		t.Errorf("%d actors after the attacks, %d before: %v", len(actorsAfter.Actors), len(actorsBefore.Actors), actorsAfter.Actors)
	}
	a.unchanged(t, ctx)
}

// A fake node registers with RegisterNode to receive real bundles.
func TestAFakeNodeCannotRegister(t *testing.T) {
	a := cluster(t)
	ctx := attackContext(t)
	for _, w := range a.attackers() {
		t.Run(w.name, func(t *testing.T) {
			_, err := pb.NewNodeInfoServiceClient(w.dial(t, a.c.GCSAddress, 0)).RegisterNode(ctx, &pb.RegisterNodeRequest{Node: &pb.NodeInfo{
				NodeId: strings.Repeat("fa", 32), NodeIp: "127.0.0.1", RayletAddress: "127.0.0.1:1", State: pb.NodeState_ALIVE,
				ResourcesTotal: map[string]float64{"GPU": 8}, ResourcesAvailable: map[string]float64{"GPU": 8}}})
			w.gcsRefuses(t, "RegisterNode of a fake node", err)
		})
	}
	a.unchanged(t, ctx) // two nodes: no fake among them
}

// A live node's id registered again with another raylet address, to take its bundles.
// A node token is not enough either: only the node's own secret re-registers it.
func TestANodeIdCannotBeHijacked(t *testing.T) {
	a := cluster(t)
	ctx := attackContext(t)
	hijack := &pb.RegisterNodeRequest{Node: &pb.NodeInfo{NodeId: a.worker.NodeID, NodeIp: "127.0.0.1", RayletAddress: "127.0.0.1:1",
		State: pb.NodeState_ALIVE, ResourcesTotal: map[string]float64{"CPU": 8}, ResourcesAvailable: map[string]float64{"CPU": 8}}}
	for _, w := range a.attackers() {
		t.Run(w.name, func(t *testing.T) {
			_, err := pb.NewNodeInfoServiceClient(w.dial(t, a.c.GCSAddress, 0)).RegisterNode(ctx, hijack)
			w.gcsRefuses(t, "RegisterNode of the worker's id", err)
		})
	}
	t.Run("a node token without the node's secret", func(t *testing.T) {
		_, err := pb.NewNodeInfoServiceClient(dialWith(t, a.c.GCSAddress, a.node)).RegisterNode(ctx, hijack)
		denied(t, "RegisterNode of the worker's id with a node token", err, "node_secret")
	})
	a.unchanged(t, ctx) // the worker still at its own raylet's address
}

// A node whose resources are NaN, huge or negative stops every placement. Without a node
// token it is not registered at all; with one, the GCS refuses the amounts.
func TestANodeWithNaNOrHugeOrNegativeResourcesIsRefused(t *testing.T) {
	a := cluster(t)
	ctx := attackContext(t)
	bad := map[string]float64{"NaN": math.NaN(), "1e30": 1e30, "-1": -1}
	for name, amount := range bad {
		poisoned := &pb.RegisterNodeRequest{Node: &pb.NodeInfo{NodeId: strings.Repeat("0b", 32), NodeIp: "127.0.0.1", RayletAddress: "127.0.0.1:1",
			State: pb.NodeState_ALIVE, ResourcesTotal: map[string]float64{"CPU": amount}, ResourcesAvailable: map[string]float64{"CPU": amount}}}
		for _, w := range a.attackers() {
			t.Run(name+"/"+w.name, func(t *testing.T) {
				_, err := pb.NewNodeInfoServiceClient(w.dial(t, a.c.GCSAddress, 0)).RegisterNode(ctx, poisoned)
				w.gcsRefuses(t, "RegisterNode with CPU "+name, err)
			})
		}
		t.Run(name+"/a node token", func(t *testing.T) {
			_, err := pb.NewNodeInfoServiceClient(dialWith(t, a.c.GCSAddress, a.node)).RegisterNode(ctx, poisoned)
			invalid(t, "RegisterNode with CPU "+name+" and a node token", err, "node.resources_total")
		})
	}
	a.unchanged(t, ctx)
	// The node list still renders, and a new group is still placed.
	stdout, stderr, code := harness.Run(t, a.c.Bin, []string{"list", "nodes", "--format", "json", "--address", a.c.GCSAddress}, "RAYGO_AUTH_TOKEN="+a.admin)
	if code != 0 || !json.Valid([]byte(stdout)) {
		t.Errorf("list nodes --format json: exit %d, %q %s", code, stdout, stderr)
	}
	removeAtCleanup(t, a, a.createSpreadGroup(t, ctx, 0.5))
}

// Cancelling a committed bundle on the raylet behind the GCS's back (the GCS would still
// say CREATED). A node token, which node-token raylets and their workers hold, is not
// taken by a raylet started with the cluster token either.
func TestCancellingACommittedBundleBehindTheGCSIsRefused(t *testing.T) {
	a := cluster(t)
	ctx := attackContext(t)
	for _, w := range a.attackers() {
		t.Run(w.name, func(t *testing.T) {
			manager := pb.NewNodeManagerServiceClient(w.dial(t, a.rayletAddress, 0))
			_, err := manager.CancelResourceReserve(ctx, &pb.CancelResourceReserveRequest{Bundles: []*pb.BundleKey{{PlacementGroupId: a.group}}})
			w.rayletRefuses(t, "CancelResourceReserve of the group's bundle", err, gcsOnly)
			_, err = manager.ReleaseUnusedBundles(ctx, &pb.ReleaseUnusedBundlesRequest{})
			w.rayletRefuses(t, "ReleaseUnusedBundles keeping none", err, gcsOnly)
		})
	}
	t.Run("a node token", func(t *testing.T) {
		manager := pb.NewNodeManagerServiceClient(dialWith(t, a.rayletAddress, a.node))
		_, err := manager.CancelResourceReserve(ctx, &pb.CancelResourceReserveRequest{Bundles: []*pb.BundleKey{{PlacementGroupId: a.group}}})
		refused(t, "CancelResourceReserve of the group's bundle with a node token", err)
	})
	a.unchanged(t, ctx) // the bundle still committed on the raylet, the group CREATED
}

// A "ghost" reservation, prepared and committed on a raylet for a group nobody owns, to
// hold its resources.
func TestAGhostReservationIsRefused(t *testing.T) {
	a := cluster(t)
	ctx := attackContext(t)
	ghost := &pb.BundleKey{PlacementGroupId: "ffffffffffffffffffffffffffff", Generation: 1}
	for _, w := range a.attackers() {
		t.Run(w.name, func(t *testing.T) {
			manager := pb.NewNodeManagerServiceClient(w.dial(t, a.rayletAddress, 0))
			_, err := manager.PrepareBundleResources(ctx, &pb.PrepareBundleResourcesRequest{Commit: true, Bundles: []*pb.BundleReservation{{
				Key: ghost, Resources: map[string]float64{"CPU": 4}}}})
			w.rayletRefuses(t, "PrepareBundleResources of a ghost", err, gcsOnly)
			_, err = manager.CommitBundleResources(ctx, &pb.CommitBundleResourcesRequest{Bundles: []*pb.BundleKey{ghost}})
			w.rayletRefuses(t, "CommitBundleResources of a ghost", err, gcsOnly)
		})
	}
	for _, b := range a.workerStats(t, ctx).Bundles {
		if b.Key.GetPlacementGroupId() == ghost.PlacementGroupId {
			t.Errorf("the raylet holds the ghost's bundle: %v", b)
		}
	}
	a.unchanged(t, ctx)
}

// An epoch of 2^63-1 on a call to a raylet, so that it refuses the real GCS from then on.
func TestAForgedEpochChangesNothing(t *testing.T) {
	a := cluster(t)
	ctx := attackContext(t)
	for _, w := range a.attackers() {
		t.Run(w.name, func(t *testing.T) {
			manager := pb.NewNodeManagerServiceClient(w.dial(t, a.rayletAddress, math.MaxInt64))
			_, err := manager.ReleaseUnusedBundles(ctx, &pb.ReleaseUnusedBundlesRequest{InUse: []*pb.BundleKey{{PlacementGroupId: a.group}}})
			w.rayletRefuses(t, "ReleaseUnusedBundles with a forged epoch", err, gcsOnly)
			_, err = manager.GetNodeStats(ctx, &pb.GetNodeStatsRequest{})
			w.rayletRefuses(t, "GetNodeStats with a forged epoch", err, gcsOnly)
		})
	}
	a.unchanged(t, ctx) // the raylet still on the GCS's epoch
	// The GCS still prepares and commits there.
	removeAtCleanup(t, a, a.createSpreadGroup(t, ctx, 0.5))
}

// UnregisterNode forged to take a healthy node out. A node token is not enough either:
// only the node's own secret unregisters it.
func TestAForgedUnregisterNodeChangesNothing(t *testing.T) {
	a := cluster(t)
	ctx := attackContext(t)
	for _, w := range a.attackers() {
		t.Run(w.name, func(t *testing.T) {
			_, err := pb.NewNodeInfoServiceClient(w.dial(t, a.c.GCSAddress, 0)).UnregisterNode(ctx, &pb.UnregisterNodeRequest{NodeId: a.worker.NodeID})
			w.gcsRefuses(t, "UnregisterNode of the worker", err)
		})
	}
	t.Run("a node token without the node's secret", func(t *testing.T) {
		_, err := pb.NewNodeInfoServiceClient(dialWith(t, a.c.GCSAddress, a.node)).UnregisterNode(ctx, &pb.UnregisterNodeRequest{NodeId: a.worker.NodeID})
		denied(t, "UnregisterNode of the worker with a node token", err, "node_secret")
	})
	a.unchanged(t, ctx) // the worker ALIVE
}

// A rogue memberlist member claiming the worker's id joins the gossip to declare it
// dead: without the cluster's key (none, or one derived from a tenant's token) it
// cannot join.
func TestARogueGossipMemberCannotJoinOrDeclareANodeDead(t *testing.T) {
	a := cluster(t)
	ctx := attackContext(t)
	info, err := pb.NewNodeInfoServiceClient(a.adminConn).GetClusterInfo(ctx, &pb.GetClusterInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []attacker{{"no key", ""}, {"the key of a tenant token", a.tenant}} {
		t.Run(w.name, func(t *testing.T) {
			config := membership.Config{Name: a.worker.NodeID, BindIP: "127.0.0.1", Meta: membership.Meta{Kind: "raylet", NodeID: a.worker.NodeID}}
			if w.token != "" {
				config.SecretKey = internalauth.GossipKey(w.token)
			}
			rogue, err := membership.Start(config, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer rogue.Shutdown()
			if n, err := rogue.Join([]string{info.GossipAddress}); err == nil || n > 0 {
				t.Errorf("a gossip member with %s joined (%d, %v)", w.name, n, err)
			}
		})
	}
	a.unchanged(t, ctx) // the worker ALIVE
}

// Draining a node through the autoscaler's service, to empty it of its bundles, or
// reading the cluster's state there.
func TestDrainingANodeThroughTheAutoscalerServiceIsRefused(t *testing.T) {
	a := cluster(t)
	ctx := attackContext(t)
	for _, w := range a.attackers() {
		t.Run(w.name, func(t *testing.T) {
			autoscaler := pb.NewAutoscalerStateServiceClient(w.dial(t, a.c.GCSAddress, 0))
			_, err := autoscaler.DrainNode(ctx, &pb.AutoscalerDrainNodeRequest{NodeId: a.worker.NodeID, Reason: pb.DrainNodeReason_DRAIN_NODE_REASON_PREEMPTION})
			w.gcsRefuses(t, "DrainNode (autoscaler)", err)
			_, err = autoscaler.GetClusterResourceState(ctx, &pb.GetClusterResourceStateRequest{})
			w.gcsRefuses(t, "GetClusterResourceState", err)
			_, err = autoscaler.RequestClusterResourceConstraint(ctx, &pb.RequestClusterResourceConstraintRequest{})
			w.gcsRefuses(t, "RequestClusterResourceConstraint", err)
		})
	}
	a.unchanged(t, ctx) // the worker not draining
}

// A worker leased straight from a raylet, outside any placement the GCS made.
func TestLeasingAWorkerFromARayletIsRefused(t *testing.T) {
	a := cluster(t)
	ctx := attackContext(t)
	for _, w := range a.attackers() {
		t.Run(w.name, func(t *testing.T) {
			_, err := pb.NewNodeManagerServiceClient(w.dial(t, a.rayletAddress, 0)).RequestWorkerLease(ctx, &pb.RequestWorkerLeaseRequest{
				JobId: "01000000", PlacementGroupId: a.group, BundleIndex: -1, Resources: map[string]float64{"CPU": 1}})
			w.rayletRefuses(t, "RequestWorkerLease in the group", err, "job_id")
		})
	}
	a.unchanged(t, ctx)
}

// invalid checks that err is an InvalidArgument whose message names want.
func invalid(t *testing.T, what string, err error, want string) {
	t.Helper()
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %v, want InvalidArgument naming %q", what, err, want)
	}
}

// removeAtCleanup removes, with the cluster token, a group a test made on the shared
// cluster.
func removeAtCleanup(t *testing.T, a *attacked, id string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pb.NewPlacementGroupServiceClient(a.adminConn).RemovePlacementGroup(ctx, &pb.RemovePlacementGroupRequest{PlacementGroupId: id}); err != nil {
			t.Errorf("remove the group %s: %v", id, err)
		}
	})
}
