package auth

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/internal/rpcutil"
	"github.com/raygo-dev/raygo/internal/testutil/redisserver"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// tenantQueues gives each tenant a queue and the namespace of the same name.
const tenantQueues = `queues:
  - name: a
    namespaces: ["a"]
    resources:
      CPU: {nominalQuota: 8}
  - name: b
    namespaces: ["b"]
    resources:
      CPU: {nominalQuota: 8}
`

// denied checks that err is a PermissionDenied whose message names want.
func denied(t *testing.T, what string, err error, want string) {
	t.Helper()
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %v, want PermissionDenied naming %q", what, err, want)
	}
}

// issue runs `raygo auth issue --scope scope` with the admin token and returns the
// token it printed.
func issue(t testing.TB, c *harness.Cluster, admin, scope string) string {
	t.Helper()
	stdout, stderr, code := harness.Run(t, c.Bin, []string{"auth", "issue", "--scope", scope, "--address", c.GCSAddress}, "RAYGO_AUTH_TOKEN="+admin)
	token := strings.TrimSpace(stdout)
	if code != 0 || len(token) != 64 || strings.Contains(stderr, token) {
		t.Fatalf("auth issue --scope %s: exit %d, %q %s; want one token on stdout only", scope, code, stdout, stderr)
	}
	return token
}

// revoke runs `raygo auth revoke` with the admin token on the (one) issued token of
// the scope, found with `raygo auth list`, and returns its id.
func revoke(t *testing.T, c *harness.Cluster, admin, scope string) string {
	t.Helper()
	listed, _, _ := harness.Run(t, c.Bin, []string{"auth", "list", "--address", c.GCSAddress}, "RAYGO_AUTH_TOKEN="+admin)
	id := ""
	for _, line := range strings.Split(listed, "\n") {
		if fields := strings.Fields(line); len(fields) == 3 && fields[1] == scope {
			id = fields[0]
		}
	}
	if _, stderr, code := harness.Run(t, c.Bin, []string{"auth", "revoke", id, "--address", c.GCSAddress}, "RAYGO_AUTH_TOKEN="+admin); code != 0 {
		t.Fatalf("auth revoke %q (%s): exit %d: %s", id, scope, code, stderr)
	}
	return id
}

func dialWith(t testing.TB, addr, token string) *grpc.ClientConn {
	t.Helper()
	conn, err := rpcutil.Dial(addr, rpcutil.DialOptions{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// startAuthHead starts a head with RAYGO_AUTH_MODE=token (and env), from a test process
// that has no token anywhere, and returns it with the cluster token the head generated
// and saved in its own HOME.
func startAuthHead(t *testing.T, env []string, extra ...string) (*harness.Cluster, string) {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	t.Setenv("RAYGO_AUTH_TOKEN", "")
	t.Setenv("RAYGO_AUTH_TOKEN_PATH", "")
	home := t.TempDir()
	c := harness.StartHeadWithEnv(t, append(append([]string{}, env...), "HOME="+home, "RAYGO_AUTH_MODE=token"), extra...)
	return c, harness.HeadToken(t, home)
}

// tenantWork is what one tenant made through the SDK with its own token: a group and
// an actor in its namespace (whose queue is the tenant's).
type tenantWork struct {
	group, actor string
}

func makeTenantWork(t *testing.T, ctx context.Context, address, token, namespace string) tenantWork {
	t.Helper()
	client := tenantClient(t, ctx, address, token, namespace)
	pg, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}}, sdk.Pack)
	if err != nil {
		t.Fatalf("tenant %s creates a group: %v", namespace, err)
	}
	if _, err := pg.Ready(ctx); err != nil {
		t.Fatalf("tenant %s's group: %v", namespace, err)
	}
	counter, err := client.CreateActor(ctx, "Counter", nil)
	if err != nil {
		t.Fatalf("tenant %s creates an actor: %v", namespace, err)
	}
	info, err := counter.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return tenantWork{group: pg.ID, actor: info.ID}
}

// The scoped tokens on real processes with the Redis store and queues a and b: tenant
// A (queue:a) and tenant B (namespace:b) each make a group and an actor with their own
// token; a tenant token sees, removes, kills and creates only its own (a subtest per
// attempt; the node, raylet and autoscaler attacks are in attacks_test.go); admin may do
// everything; a revoked token is refused at once and still after a GCS restart.
func TestScopedTokensIsolateTenants(t *testing.T) {
	queues := filepath.Join(t.TempDir(), "queues.yaml")
	if err := os.WriteFile(queues, []byte(tenantQueues), 0o644); err != nil {
		t.Fatal(err)
	}
	redis := redisserver.Start(t)
	c, admin := startAuthHead(t, nil, "--num-cpus", "4", "--dashboard-port", "0",
		"--store", "redis", "--redis-address", redis.Addr, "--redis-namespace", "scoped-tokens", "--queues", queues)

	tokenA := issue(t, c, admin, "queue:a")
	tokenB := issue(t, c, admin, "namespace:b")
	tokenNode := issue(t, c, admin, "node")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a := makeTenantWork(t, ctx, c.GCSAddress, tokenA, "a")
	b := makeTenantWork(t, ctx, c.GCSAddress, tokenB, "b")

	adminConn := dialWith(t, c.GCSAddress, admin)
	tenant := dialWith(t, c.GCSAddress, tokenA)
	groupsA, actorsA := pb.NewPlacementGroupServiceClient(tenant), pb.NewActorInfoServiceClient(tenant)

	t.Run("TenantListsOnlyItsOwnGroupsAndActors", func(t *testing.T) {
		groups, err := groupsA.GetAllPlacementGroup(ctx, &pb.GetAllPlacementGroupRequest{})
		if err != nil || len(groups.PlacementGroups) != 1 || groups.PlacementGroups[0].PlacementGroupId != a.group {
			t.Errorf("tenant A lists groups %v (%v); want only its own %s", groups, err, a.group)
		}
		actors, err := actorsA.GetAllActorInfo(ctx, &pb.GetAllActorInfoRequest{})
		if err != nil || len(actors.Actors) != 1 || actors.Actors[0].ActorId != a.actor {
			t.Errorf("tenant A lists actors %v (%v); want only its own %s", actors, err, a.actor)
		}
		jobs, err := pb.NewJobInfoServiceClient(tenant).GetAllJobInfo(ctx, &pb.GetAllJobInfoRequest{})
		for _, job := range jobs.GetJobs() {
			if job.Namespace != "a" {
				t.Errorf("tenant A lists job %s of namespace %q", job.JobId, job.Namespace)
			}
		}
		if err != nil || len(jobs.GetJobs()) == 0 {
			t.Errorf("tenant A lists jobs %v (%v); want its own", jobs, err)
		}
	})
	t.Run("TenantCannotSeeAnotherTenantsGroup", func(t *testing.T) {
		reply, err := groupsA.GetPlacementGroup(ctx, &pb.GetPlacementGroupRequest{PlacementGroupId: b.group})
		if err != nil || reply.PlacementGroup != nil {
			t.Errorf("tenant A gets B's group: %v %v; want it answered as unknown", reply, err)
		}
	})
	t.Run("TenantCannotSeeAnotherTenantsActor", func(t *testing.T) {
		reply, err := actorsA.GetActorInfo(ctx, &pb.GetActorInfoRequest{ActorId: b.actor})
		if status.Code(err) != codes.NotFound {
			t.Errorf("tenant A gets B's actor: %v %v; want NotFound as for an unknown id", reply, err)
		}
	})
	t.Run("TenantCannotRemoveAnotherTenantsGroup", func(t *testing.T) {
		_, err := groupsA.RemovePlacementGroup(ctx, &pb.RemovePlacementGroupRequest{PlacementGroupId: b.group})
		denied(t, "tenant A removes B's group", err, "placement_group_id")
		// Nor through a removal riding on a create.
		_, err = groupsA.CreatePlacementGroup(ctx, &pb.CreatePlacementGroupRequest{Strategy: "PACK", Lifetime: "detached",
			Bundles:                 []*pb.CreatePlacementGroupRequest_BundleSpec{{Resources: map[string]float64{"CPU": 1}}},
			RemovePlacementGroupIds: []string{b.group}})
		denied(t, "tenant A's create carrying the removal of B's group", err, "remove_placement_group_ids[0]")
		reply, err := pb.NewPlacementGroupServiceClient(adminConn).GetPlacementGroup(ctx, &pb.GetPlacementGroupRequest{PlacementGroupId: b.group})
		if err != nil || reply.PlacementGroup.GetState() != pb.PlacementGroupState_CREATED {
			t.Errorf("B's group after A's removal: %v %v; want CREATED", reply, err)
		}
	})
	t.Run("TenantCannotKillAnotherTenantsActor", func(t *testing.T) {
		_, err := actorsA.KillActor(ctx, &pb.KillActorRequest{ActorId: b.actor, NoRestart: true})
		denied(t, "tenant A kills B's actor", err, "actor_id")
		reply, err := pb.NewActorInfoServiceClient(adminConn).GetActorInfo(ctx, &pb.GetActorInfoRequest{ActorId: b.actor})
		if err != nil || reply.Actor.State == pb.ActorState_ACTOR_DEAD {
			t.Errorf("B's actor after A's kill: %v %v; want it not DEAD", reply, err)
		}
	})
	t.Run("TenantCannotCreateInAnotherQueueOrNamespace", func(t *testing.T) {
		bundle := []*pb.CreatePlacementGroupRequest_BundleSpec{{Resources: map[string]float64{"CPU": 1}}}
		_, err := groupsA.CreatePlacementGroup(ctx, &pb.CreatePlacementGroupRequest{Bundles: bundle, Strategy: "PACK", Lifetime: "detached", Queue: "b"})
		denied(t, "tenant A creates a group in queue b", err, "queue")
		_, err = groupsA.CreatePlacementGroup(ctx, &pb.CreatePlacementGroupRequest{Bundles: bundle, Strategy: "PACK", Lifetime: "detached", Namespace: "b"})
		denied(t, "tenant A creates a group in namespace b (queue b)", err, "namespace")
		_, err = actorsA.CreateActor(ctx, &pb.CreateActorRequest{ClassName: "Counter", Namespace: "b", IsDetached: true})
		denied(t, "tenant A creates an actor in namespace b", err, "namespace")
		_, err = pb.NewJobInfoServiceClient(tenant).AddJob(ctx, &pb.AddJobRequest{Namespace: "b"})
		denied(t, "tenant A adds a job in namespace b", err, "namespace")
		_, err = pb.NewPlacementGroupServiceClient(dialWith(t, c.GCSAddress, tokenB)).CreatePlacementGroup(ctx,
			&pb.CreatePlacementGroupRequest{Bundles: bundle, Strategy: "PACK", Lifetime: "detached", Namespace: "a"})
		denied(t, "tenant B (namespace:b) creates a group in namespace a", err, "namespace")
	})
	t.Run("TenantCannotLeaseOrPlaceInAnotherTenantsGroup", func(t *testing.T) {
		inGroup := func(id string) *pb.SchedulingStrategy {
			return &pb.SchedulingStrategy{Kind: pb.SchedulingStrategyKind_SCHEDULING_STRATEGY_PLACEMENT_GROUP, PlacementGroupId: id, BundleIndex: 0}
		}
		cpu := map[string]float64{"CPU": 1}
		_, err := actorsA.ChooseLeaseTargets(ctx, &pb.ChooseLeaseTargetsRequest{RequestId: "steal", Resources: cpu, SchedulingStrategy: inGroup(b.group)})
		denied(t, "tenant A leases in B's group", err, "scheduling_strategy.placement_group_id")
		_, err = actorsA.CreateActor(ctx, &pb.CreateActorRequest{ClassName: "Counter", Namespace: "a", IsDetached: true,
			RequiredResources: cpu, SchedulingStrategy: inGroup(b.group)})
		denied(t, "tenant A places an actor in B's group", err, "scheduling_strategy.placement_group_id")
		reply, err := actorsA.ChooseLeaseTargets(ctx, &pb.ChooseLeaseTargetsRequest{RequestId: "own", Resources: map[string]float64{"CPU": 0.5}, SchedulingStrategy: inGroup(a.group)})
		if err != nil || reply.Outcome == pb.LeaseOutcome_LEASE_OUTCOME_UNSCHEDULABLE {
			t.Errorf("tenant A leases in its own group: %v %v; want an answer", reply, err)
		}
		_, err = pb.NewActorInfoServiceClient(dialWith(t, c.GCSAddress, tokenNode)).ChooseLeaseTargets(ctx,
			&pb.ChooseLeaseTargetsRequest{RequestId: "node", Resources: cpu, SchedulingStrategy: inGroup(a.group)})
		denied(t, "a node token leases", err, "tenant")
	})
	t.Run("TenantCannotManageTokens", func(t *testing.T) {
		_, err := pb.NewAuthServiceClient(tenant).IssueToken(ctx, &pb.IssueTokenRequest{Scope: "admin"})
		denied(t, "IssueToken with a tenant token", err, "admin token")
		_, err = pb.NewAuthServiceClient(dialWith(t, c.GCSAddress, tokenNode)).ListTokens(ctx, &pb.ListTokensRequest{})
		denied(t, "ListTokens with a node token", err, "admin token")
	})
	t.Run("NodeTokenReadsTheAutoscalerStateButCreatesNoWork", func(t *testing.T) {
		node := dialWith(t, c.GCSAddress, tokenNode)
		if _, err := pb.NewAutoscalerStateServiceClient(node).GetClusterResourceState(ctx, &pb.GetClusterResourceStateRequest{}); err != nil {
			t.Errorf("GetClusterResourceState with a node token: %v", err)
		}
		_, err := pb.NewPlacementGroupServiceClient(node).CreatePlacementGroup(ctx, &pb.CreatePlacementGroupRequest{
			Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{{Resources: map[string]float64{"CPU": 1}}}, Strategy: "PACK", Lifetime: "detached"})
		denied(t, "CreatePlacementGroup with a node token", err, "tenant")
		// Nor does it read the tenants' groups, actors or jobs.
		groups, err := pb.NewPlacementGroupServiceClient(node).GetAllPlacementGroup(ctx, &pb.GetAllPlacementGroupRequest{})
		if err != nil || len(groups.PlacementGroups) != 0 {
			t.Errorf("GetAllPlacementGroup with a node token: %v %v; want no group", groups, err)
		}
		jobs, err := pb.NewJobInfoServiceClient(node).GetAllJobInfo(ctx, &pb.GetAllJobInfoRequest{})
		if err != nil || len(jobs.Jobs) != 0 {
			t.Errorf("GetAllJobInfo with a node token: %v %v; want no job", jobs, err)
		}
		if reply, err := pb.NewActorInfoServiceClient(node).GetActorInfo(ctx, &pb.GetActorInfoRequest{ActorId: b.actor}); status.Code(err) != codes.NotFound {
			t.Errorf("GetActorInfo of B's actor with a node token: %v %v; want NotFound as for an unknown id", reply, err)
		}
	})
	t.Run("TenantDashboardShowsOnlyItsOwn", func(t *testing.T) {
		info, err := pb.NewNodeInfoServiceClient(tenant).GetClusterInfo(ctx, &pb.GetClusterInfoRequest{})
		if err != nil || info.DashboardAddress == "" {
			t.Fatalf("GetClusterInfo: %v %v; want the dashboard's address", info, err)
		}
		get := func(path, token string) (int, string) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+info.DashboardAddress+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}
		for path, ids := range map[string][2]string{"/api/v0/placement_groups": {a.group, b.group}, "/api/v0/actors": {a.actor, b.actor}} {
			own, others := ids[0], ids[1]
			if code, body := get(path, tokenA); code != http.StatusOK || !strings.Contains(body, own) || strings.Contains(body, others) {
				t.Errorf("tenant A's %s: %d %s; want its own %s and not B's %s", path, code, body, own, others)
			}
			if code, body := get(path, admin); code != http.StatusOK || !strings.Contains(body, others) {
				t.Errorf("admin's %s: %d %s; want B's %s too", path, code, body, others)
			}
		}
		for _, path := range []string{"/api/v0/cluster_status", "/metrics"} {
			if code, body := get(path, tokenA); code != http.StatusForbidden {
				t.Errorf("tenant A's %s: %d %.200s; want 403", path, code, body)
			}
		}
		if code, _ := get("/api/v0/placement_groups", "not-a-token"); code != http.StatusUnauthorized {
			t.Errorf("the dashboard with a wrong token: %d, want 401", code)
		}
	})
	t.Run("AuthListNeverPrintsAToken", func(t *testing.T) {
		stdout, stderr, code := harness.Run(t, c.Bin, []string{"auth", "list", "--address", c.GCSAddress}, "RAYGO_AUTH_TOKEN="+admin)
		if code != 0 || !strings.Contains(stdout, "queue:a") || !strings.Contains(stdout, "namespace:b") || !strings.Contains(stdout, "node") {
			t.Fatalf("auth list: exit %d, %q %s; want the three tokens' scopes", code, stdout, stderr)
		}
		for _, token := range []string{admin, tokenA, tokenB, tokenNode} {
			if strings.Contains(stdout+stderr, token) || strings.Contains(stdout+stderr, token[:16]) {
				t.Errorf("auth list printed a token (or its start): %q", stdout)
			}
		}
	})
	t.Run("AdminCanDoEverything", func(t *testing.T) {
		groups, err := pb.NewPlacementGroupServiceClient(adminConn).GetAllPlacementGroup(ctx, &pb.GetAllPlacementGroupRequest{})
		if err != nil || len(groups.PlacementGroups) != 2 {
			t.Errorf("admin lists %v (%v); want both tenants' groups", groups, err)
		}
		if _, err := pb.NewActorInfoServiceClient(adminConn).KillActor(ctx, &pb.KillActorRequest{ActorId: b.actor, NoRestart: true}); err != nil {
			t.Errorf("admin kills B's actor: %v", err)
		}
		if _, err := pb.NewPlacementGroupServiceClient(adminConn).RemovePlacementGroup(ctx, &pb.RemovePlacementGroupRequest{PlacementGroupId: b.group}); err != nil {
			t.Errorf("admin removes B's group: %v", err)
		}
	})

	// Tenant A removes its own group; then its token is revoked: refused at once, and
	// still after the GCS restarts from Redis, while B's token still works.
	if _, err := groupsA.RemovePlacementGroup(ctx, &pb.RemovePlacementGroupRequest{PlacementGroupId: a.group}); err != nil {
		t.Errorf("tenant A removes its own group: %v", err)
	}
	idA := revoke(t, c, admin, "queue:a")
	_, err := groupsA.GetAllPlacementGroup(ctx, &pb.GetAllPlacementGroupRequest{})
	refused(t, "a revoked token", err)

	if err := syscall.Kill(c.Head.ReadRecord(t).GCSPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	groupsB := pb.NewPlacementGroupServiceClient(dialWith(t, c.GCSAddress, tokenB))
	harness.Eventually(t, 40*time.Second, "the restarted GCS answers tenant B's token", func() error {
		_, err := groupsB.GetAllPlacementGroup(ctx, &pb.GetAllPlacementGroupRequest{})
		return err
	})
	_, err = groupsA.GetAllPlacementGroup(ctx, &pb.GetAllPlacementGroupRequest{})
	refused(t, "a revoked token after a GCS restart", err)
	if listed, _, _ := harness.Run(t, c.Bin, []string{"auth", "list", "--address", c.GCSAddress}, "RAYGO_AUTH_TOKEN="+admin); strings.Contains(listed, idA) ||
		!strings.Contains(listed, "namespace:b") {
		t.Errorf("auth list after the restart: %q; want B's token and not the revoked %s", listed, idA)
	}
}
