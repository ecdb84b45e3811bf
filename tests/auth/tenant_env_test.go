package auth

import (
	"context"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/sdk"
)

// Environ is the test actor that reports its worker's token.
type Environ struct{}

// Token returns the worker's RAYGO_AUTH_TOKEN.
func (Environ) Token() string { return os.Getenv("RAYGO_AUTH_TOKEN") }

func init() {
	sdk.RegisterTask("environToken", func() string { return os.Getenv("RAYGO_AUTH_TOKEN") })
	sdk.RegisterActor("Environ", func() *Environ { return &Environ{} })
}

// A tenant's code never reads the cluster token, on a head whose raylet holds it: its
// task's worker takes the tenant's own token; its actor's worker, which the GCS leased
// with the tenant's token's hash alone, takes a token that only registered it with the
// raylet (refused afterwards), and is still created (the GCS's call reaches it) and
// called. The cluster token's task and actor workers keep the raylet's token.
func TestTenantWorkersNeverHoldTheClusterToken(t *testing.T) {
	c, admin := startAuthHead(t, nil, "--num-cpus", "4")
	tenant := issue(t, c, admin, "namespace:a")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	client := tenantClient(t, ctx, c.GCSAddress, tenant, "a")
	var taskToken string
	ref, err := client.Submit(ctx, "environToken", nil)
	if err == nil {
		err = sdk.Get(ctx, ref, &taskToken)
	}
	if err != nil {
		t.Fatalf("tenant's task: %v", err)
	}
	if taskToken == admin {
		t.Fatal("tenant's task read the cluster token from its environment")
	}
	if taskToken != tenant {
		t.Errorf("tenant's task's RAYGO_AUTH_TOKEN is not the tenant's token (%d chars)", len(taskToken))
	}

	actor, err := client.CreateActor(ctx, "Environ", nil)
	if err != nil {
		t.Fatalf("tenant's actor: %v", err)
	}
	var actorToken string
	ref, err = actor.Call(ctx, "Token")
	if err == nil {
		err = sdk.Get(ctx, ref, &actorToken)
	}
	if err != nil {
		t.Fatalf("tenant's actor call: %v", err)
	}
	if actorToken == admin || actorToken == tenant || actorToken == "" {
		t.Fatalf("tenant's actor's RAYGO_AUTH_TOKEN: cluster token %v, tenant's %v, empty %v; want its registration token",
			actorToken == admin, actorToken == tenant, actorToken == "")
	}
	all, err := pb.NewNodeInfoServiceClient(dialWith(t, c.GCSAddress, admin)).GetAllNodeInfo(ctx, &pb.GetAllNodeInfoRequest{})
	if err != nil || len(all.Nodes) != 1 {
		t.Fatalf("nodes: %v %v", all, err)
	}
	raylet := pb.NewNodeManagerServiceClient(dialWith(t, all.Nodes[0].RayletAddress, actorToken))
	_, err = raylet.RegisterWorker(ctx, &pb.RegisterWorkerRequest{WorkerId: "no-such-worker", Address: "127.0.0.1:1"})
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("the actor's token once its worker registered: %v, want Unauthenticated", err)
	}
	_, err = pb.NewNodeInfoServiceClient(dialWith(t, c.GCSAddress, actorToken)).GetAllNodeInfo(ctx, &pb.GetAllNodeInfoRequest{})
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("the actor's token at the GCS: %v, want Unauthenticated", err)
	}
}
