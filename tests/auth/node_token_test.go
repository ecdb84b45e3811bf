package auth

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	internalauth "github.com/raygo-dev/raygo/internal/auth"
	"github.com/raygo-dev/raygo/internal/membership"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// A worker node started with a node-scoped token, on a machine without the cluster
// token: it registers and heartbeats with the node token, joins the encrypted gossip
// with the key the GCS gives it, serves the GCS's 2PC and the drivers' leases (it checks
// the cluster token against the SHA-256 the GCS gave it), and its workers serve actor
// calls; the cluster token is nowhere in its processes' environment, and a tenant token
// is still refused there.
func TestAWorkerNodeRunsOnANodeToken(t *testing.T) {
	c, admin := startAuthHead(t, nil, "--num-cpus", "2")
	nodeToken := issue(t, c, admin, "node")
	tenantToken := issue(t, c, admin, "queue:a")

	c.Env = []string{"HOME=" + t.TempDir(), "RAYGO_AUTH_MODE=token", "RAYGO_AUTH_TOKEN=" + nodeToken}
	worker := c.AddNode("--num-cpus", "2")
	for name, pid := range map[string]int{"supervisor": worker.SupervisorPID, "raylet": worker.RayletPID} {
		environ, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(environ), admin) {
			t.Errorf("the node-token worker's %s holds the cluster token", name)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// STRICT_SPREAD: a bundle is on the worker, prepared and committed by the GCS there.
	client, pg := spreadGroup(t, ctx, c.GCSAddress, admin, "a group across the head and the node-token worker")
	info, err := pb.NewPlacementGroupServiceClient(dialWith(t, c.GCSAddress, admin)).GetPlacementGroup(ctx, &pb.GetPlacementGroupRequest{PlacementGroupId: pg.ID})
	if err != nil {
		t.Fatal(err)
	}
	bundle := -1
	for i, b := range info.PlacementGroup.GetBundles() {
		if b.NodeId == worker.NodeID {
			bundle = i
		}
	}
	if bundle < 0 {
		t.Fatalf("no bundle on the node-token worker %s: %v", worker.NodeID, info.PlacementGroup)
	}
	runTask(t, ctx, client, pg, bundle, "a task on the node-token worker")
	counter := callActor(t, ctx, client, pg, bundle, "an actor call on the node-token worker")

	// The worker's raylet, which asks the GCS about a tenant token, keeps it from the 2PC.
	all, err := pb.NewNodeInfoServiceClient(dialWith(t, c.GCSAddress, admin)).GetAllNodeInfo(ctx, &pb.GetAllNodeInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	raylet := pb.NewNodeManagerServiceClient(dialWith(t, harness.FindNode(all.Nodes, worker.NodeID).GetRayletAddress(), tenantToken))
	_, err = raylet.CancelResourceReserve(ctx, &pb.CancelResourceReserveRequest{Bundles: []*pb.BundleKey{{PlacementGroupId: pg.ID}}})
	denied(t, "CancelResourceReserve on the node-token worker with a tenant token", err, gcsOnly)
	// Its own node token, which its workers hold, registers workers and nothing else: not
	// the 2PC, nor a forged epoch, nor a call to a worker.
	own, err := rpcutil.Dial(harness.FindNode(all.Nodes, worker.NodeID).GetRayletAddress(), rpcutil.DialOptions{Token: nodeToken, Epoch: func() int64 { return math.MaxInt64 }})
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	_, err = pb.NewNodeManagerServiceClient(own).CancelResourceReserve(ctx, &pb.CancelResourceReserveRequest{Bundles: []*pb.BundleKey{{PlacementGroupId: pg.ID}}})
	denied(t, "CancelResourceReserve on the node-token worker with its node token and a forged epoch", err, "GCS's own credential")
	actor, err := counter.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = pb.NewCoreWorkerServiceClient(dialWith(t, actor.Address, nodeToken)).PushTask(ctx, &pb.PushTaskRequest{ActorId: actor.ID, FunctionName: "Add"})
	refused(t, "PushTask to the node-token worker's actor with the node token", err)
	if ref, err := counter.Call(ctx, "Add", 1); err != nil || sdk.Get(ctx, ref, new(int)) != nil {
		t.Errorf("the actor after the refused calls: %v", err)
	}
	if reply, err := pb.NewPlacementGroupServiceClient(dialWith(t, c.GCSAddress, admin)).GetPlacementGroup(ctx, &pb.GetPlacementGroupRequest{PlacementGroupId: pg.ID}); err != nil ||
		reply.PlacementGroup.GetState() != pb.PlacementGroupState_CREATED {
		t.Errorf("the group after the refused cancel: %v %v; want CREATED", reply, err)
	}
	// The forged epoch did not stick: the GCS still prepares and commits there.
	again, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 0.5}, {"CPU": 0.5}}, sdk.StrictSpread)
	if err == nil {
		_, err = again.Ready(ctx)
	}
	if err != nil {
		t.Errorf("a second group across both nodes after the forged epoch: %v", err)
	}

	// A member with the cluster's key, joining the GCS's gossip, learns of the worker: the
	// worker gossips under that key (the one it got from the GCS, not its token's).
	clusterInfo, err := pb.NewNodeInfoServiceClient(dialWith(t, c.GCSAddress, admin)).GetClusterInfo(ctx, &pb.GetClusterInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	seen := &members{names: map[string]bool{}}
	probe, err := membership.Start(membership.Config{Name: "probe", BindIP: "127.0.0.1", SecretKey: internalauth.GossipKey(admin),
		Meta: membership.Meta{Kind: "probe"}}, seen)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Shutdown()
	if _, err := probe.Join([]string{clusterInfo.GossipAddress}); err != nil {
		t.Fatalf("a member with the cluster's key joins the GCS: %v", err)
	}
	harness.Eventually(t, 30*time.Second, "the node-token worker in the gossip", func() error {
		if !seen.has(worker.NodeID) {
			return fmt.Errorf("members seen: %v", seen.list())
		}
		return nil
	})
}

// members records the gossip members a probe saw join.
type members struct {
	mu    sync.Mutex
	names map[string]bool
}

func (m *members) MemberJoined(name string, _ membership.Meta) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.names[name] = true
}

func (m *members) MemberFailed(string, membership.Meta) {}

func (m *members) has(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.names[name]
}

func (m *members) list() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for name := range m.names {
		out = append(out, name)
	}
	return out
}

// A node registered with a node token that then never heartbeats nor gossips (a
// machine that took a node token and went silent, or a fake) is DEAD after
// --node-timeout, and its resources leave the cluster.
func TestARegisteredNodeThatNeverHeartbeatsIsDeadAfterTheNodeTimeout(t *testing.T) {
	c, admin := startAuthHead(t, nil, "--num-cpus", "1", "--node-timeout", "2s")
	nodes := pb.NewNodeInfoServiceClient(dialWith(t, c.GCSAddress, issue(t, c, admin, "node")))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const silent = "5111e47000000000000000000000000000000000000000000000000000000000"
	reply, err := nodes.RegisterNode(ctx, &pb.RegisterNodeRequest{Node: &pb.NodeInfo{NodeId: silent, NodeIp: "127.0.0.1",
		RayletAddress: "127.0.0.1:1", State: pb.NodeState_ALIVE, ResourcesTotal: map[string]float64{"GPU": 8}, ResourcesAvailable: map[string]float64{"GPU": 8}}})
	if err != nil || reply.NodeSecret == "" {
		t.Fatalf("RegisterNode with a node token: %v %v; want a first registration", reply, err)
	}
	harness.Eventually(t, 30*time.Second, "the silent node DEAD", func() error {
		all, err := nodes.GetAllNodeInfo(ctx, &pb.GetAllNodeInfoRequest{})
		if err != nil {
			return err
		}
		if state := harness.FindNode(all.Nodes, silent).GetState(); state != pb.NodeState_DEAD {
			return fmt.Errorf("state %s", state)
		}
		return nil
	})
}
