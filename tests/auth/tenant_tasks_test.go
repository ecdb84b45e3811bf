package auth

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// tenantClient connects the SDK with a tenant's token, in namespace.
func tenantClient(t *testing.T, ctx context.Context, address, token, namespace string) *sdk.Client {
	t.Helper()
	t.Setenv("RAYGO_AUTH_TOKEN", token)
	client, err := sdk.Connect(ctx, sdk.Options{Address: address, Namespace: namespace})
	if err != nil {
		t.Fatalf("tenant %s connects with its token: %v", namespace, err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

// A tenant's token leases task workers on a raylet, which asks the GCS whose the token
// is and whether the lease's job and group are its own: a queue-scoped tenant runs a Go
// SDK task in its own group, and its worker takes its token; its actor's worker, leased
// by the GCS, takes its token too. Another tenant can lease neither for the first one's
// job nor in its group, can neither push a task to its workers, call its actor, nor
// return or kill its workers, and cannot name the token a worker takes. A revoked tenant token is refused by the raylet once
// the raylet's answer from the GCS expires.
func TestTenantTokensRunTheirOwnTasksAndActors(t *testing.T) {
	queues := filepath.Join(t.TempDir(), "queues.yaml")
	if err := os.WriteFile(queues, []byte(tenantQueues), 0o644); err != nil {
		t.Fatal(err)
	}
	c, admin := startAuthHead(t, nil, "--num-cpus", "4", "--queues", queues)
	tokenA := issue(t, c, admin, "queue:a")
	tokenB := issue(t, c, admin, "namespace:b")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	clientA := tenantClient(t, ctx, c.GCSAddress, tokenA, "a")
	pgA, err := clientA.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}}, sdk.Pack)
	if err == nil {
		_, err = pgA.Ready(ctx)
	}
	if err != nil {
		t.Fatalf("tenant A's group: %v", err)
	}
	runTask(t, ctx, clientA, pgA, 0, "tenant A's task in its own group, with its token")
	counterA := callActor(t, ctx, clientA, pgA, 0, "tenant A calls its own actor, with its token")
	actorA, err := counterA.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clientB := tenantClient(t, ctx, c.GCSAddress, tokenB, "b")

	all, err := pb.NewNodeInfoServiceClient(dialWith(t, c.GCSAddress, admin)).GetAllNodeInfo(ctx, &pb.GetAllNodeInfoRequest{})
	if err != nil || len(all.Nodes) != 1 {
		t.Fatalf("nodes: %v %v", all, err)
	}
	rayletAddress := all.Nodes[0].RayletAddress
	workers, err := pb.NewNodeManagerServiceClient(dialWith(t, rayletAddress, admin)).GetWorkers(ctx, &pb.GetWorkersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var workerA *pb.WorkerInfo
	for _, w := range workers.Workers {
		if w.JobId == clientA.JobID() {
			workerA = w
		}
	}
	if workerA == nil {
		t.Fatalf("no worker of tenant A's job %s on the raylet: %v", clientA.JobID(), workers.Workers)
	}

	rayletB := pb.NewNodeManagerServiceClient(dialWith(t, rayletAddress, tokenB))
	cpu := map[string]float64{"CPU": 0.5}
	_, err = rayletB.RequestWorkerLease(ctx, &pb.RequestWorkerLeaseRequest{JobId: clientB.JobID(), Resources: cpu, PlacementGroupId: pgA.ID, BundleIndex: 0})
	denied(t, "tenant B leases in A's group", err, "placement_group_id")
	_, err = rayletB.RequestWorkerLease(ctx, &pb.RequestWorkerLeaseRequest{JobId: clientA.JobID(), Resources: cpu})
	denied(t, "tenant B leases for A's job", err, "job_id")
	_, err = rayletB.RequestWorkerLease(ctx, &pb.RequestWorkerLeaseRequest{JobId: clientB.JobID(), Resources: cpu, ActorId: "aa"})
	denied(t, "tenant B leases an actor's worker", err, "actor_id")
	_, err = rayletB.ReturnWorker(ctx, &pb.ReturnWorkerRequest{WorkerId: workerA.WorkerId, Disconnect: true})
	denied(t, "tenant B returns A's worker", err, "worker_id")
	_, err = rayletB.KillWorker(ctx, &pb.KillWorkerRequest{WorkerId: workerA.WorkerId})
	denied(t, "tenant B kills A's worker", err, "worker_id")
	_, err = rayletB.GetWorkers(ctx, &pb.GetWorkersRequest{})
	denied(t, "tenant B lists the raylet's workers", err, "cluster token")
	_, err = pb.NewCoreWorkerServiceClient(dialWith(t, workerA.Address, tokenB)).PushTask(ctx, &pb.PushTaskRequest{FunctionName: "square"})
	refused(t, "tenant B pushes a task to A's worker", err)
	_, err = pb.NewCoreWorkerServiceClient(dialWith(t, actorA.Address, tokenB)).PushTask(ctx, &pb.PushTaskRequest{ActorId: actorA.ID, FunctionName: "Add"})
	refused(t, "tenant B calls A's actor", err)
	_, err = rayletB.RequestWorkerLease(ctx, &pb.RequestWorkerLeaseRequest{JobId: clientB.JobID(), Resources: cpu, LesseeTokenSha256: strings.Repeat("0", 64)})
	denied(t, "tenant B names the token a worker should take", err, gcsOnly)
	// B's own work runs (a task leased from the node, in its own job).
	var nine int
	ref, err := clientB.Submit(ctx, "square", sdk.Args(3))
	if err == nil {
		err = sdk.Get(ctx, ref, &nine)
	}
	if err != nil || nine != 9 {
		t.Errorf("tenant B's own task: %d %v", nine, err)
	}
	// A's workers were not returned nor killed by B: A's next task and call still run.
	runTask(t, ctx, clientA, pgA, 0, "tenant A's task after B's refused calls")
	var two int
	if ref, err := counterA.Call(ctx, "Add", 1); err != nil || sdk.Get(ctx, ref, &two) != nil || two != 2 {
		t.Errorf("tenant A's actor after B's refused calls: %d %v", two, err)
	}

	// A's token revoked: the raylet refuses it once its answer from the GCS expired.
	revoke(t, c, admin, "queue:a")
	rayletA := pb.NewNodeManagerServiceClient(dialWith(t, rayletAddress, tokenA))
	// A call that changes nothing: PermissionDenied while the raylet still takes the
	// token (no worker has that id), Unauthenticated once it does not.
	harness.Eventually(t, 60*time.Second, "the raylet refuses tenant A's revoked token", func() error {
		_, err := rayletA.ReturnWorker(ctx, &pb.ReturnWorkerRequest{WorkerId: "no-such-worker"})
		if status.Code(err) == codes.Unauthenticated {
			return nil
		}
		return fmt.Errorf("not refused as unknown yet: %v", err)
	})
}
