package gcs

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	"github.com/raygo-dev/raygo/internal/testutil/poll"
	"github.com/raygo-dev/raygo/internal/testutil/redisserver"
	"github.com/raygo-dev/raygo/placement"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

type actorTestClients struct {
	actors pb.ActorInfoServiceClient
	exes   pb.ExecutableServiceClient
	pgs    pb.PlacementGroupServiceClient
	jobs   pb.JobInfoServiceClient
	nodes  pb.NodeInfoServiceClient
}

func dialActors(t *testing.T, addr string) actorTestClients {
	t.Helper()
	conn, err := rpcutil.Dial(addr, rpcutil.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return actorTestClients{pb.NewActorInfoServiceClient(conn), pb.NewExecutableServiceClient(conn),
		pb.NewPlacementGroupServiceClient(conn), pb.NewJobInfoServiceClient(conn), pb.NewNodeInfoServiceClient(conn)}
}

// actorFixture is a GCS with a job and an uploaded executable.
type actorFixture struct {
	s     *Server
	c     actorTestClients
	jobID string
	sha   string
}

func newActorFixture(t *testing.T, st store.Store, mutate ...func(*Config)) actorFixture {
	t.Helper()
	s := startGCS(t, st, mutate...)
	c := dialActors(t, s.Address())
	ctx := context.Background()
	job, err := c.jobs.AddJob(ctx, &pb.AddJobRequest{Namespace: "team", DriverPid: 1})
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("#!/bin/true\n")
	sha := sha256Hex(data)
	if err := uploadChunks(ctx, c.exes, sha, int64(len(data)), [][]byte{data}); err != nil {
		t.Fatal(err)
	}
	return actorFixture{s: s, c: c, jobID: job.Job.JobId, sha: sha}
}

// request is a valid CreateActor request of the fixture's job; mutate changes it.
func (f actorFixture) request(mutate ...func(*pb.CreateActorRequest)) *pb.CreateActorRequest {
	req := &pb.CreateActorRequest{JobId: f.jobID, ClassName: "Counter", ExecutableSha256: f.sha,
		RequiredResources: map[string]float64{"CPU": 1}, ConstructorArgs: [][]byte{{0x01}}}
	for _, m := range mutate {
		m(req)
	}
	return req
}

func (f actorFixture) create(t *testing.T, mutate ...func(*pb.CreateActorRequest)) *pb.ActorInfo {
	t.Helper()
	reply, err := f.c.actors.CreateActor(context.Background(), f.request(mutate...))
	if err != nil {
		t.Fatalf("CreateActor: %v", err)
	}
	return reply.Actor
}

func (f actorFixture) get(t *testing.T, id string) *pb.ActorInfo {
	t.Helper()
	reply, err := f.c.actors.GetActorInfo(context.Background(), &pb.GetActorInfoRequest{ActorId: id})
	if err != nil {
		t.Fatalf("GetActorInfo %s: %v", id, err)
	}
	return reply.Actor
}

// eventually polls check until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	poll.Until(t, timeout, 20*time.Millisecond, what, check)
}

func TestCheckActorRequestNamesTheField(t *testing.T) {
	sha := sha256Hex([]byte("x"))
	valid := func() *pb.CreateActorRequest {
		return &pb.CreateActorRequest{JobId: "01000000", ClassName: "Counter", ExecutableSha256: sha}
	}
	cases := []struct {
		name   string
		mutate func(*pb.CreateActorRequest)
		want   []string
	}{
		{"no job", func(r *pb.CreateActorRequest) { r.JobId = "" }, []string{"job_id", "required"}},
		{"no class", func(r *pb.CreateActorRequest) { r.ClassName = "" }, []string{"class_name", "required"}},
		{"negative resource", func(r *pb.CreateActorRequest) { r.RequiredResources = map[string]float64{"GPU": -1} }, []string{`required_resources["GPU"]`, "-1"}},
		{"empty resource name", func(r *pb.CreateActorRequest) { r.RequiredResources = map[string]float64{"": 1} }, []string{`required_resources[""]`, "empty"}},
		{"max_restarts", func(r *pb.CreateActorRequest) { r.MaxRestarts = -2 }, []string{"max_restarts", "-2"}},
		{"max_task_retries", func(r *pb.CreateActorRequest) { r.MaxTaskRetries = -5 }, []string{"max_task_retries", "-5"}},
		{"strategy kind", func(r *pb.CreateActorRequest) { r.SchedulingStrategy = &pb.SchedulingStrategy{Kind: 99} }, []string{"scheduling_strategy.kind", "got 99"}},
		{"group without id", func(r *pb.CreateActorRequest) {
			r.SchedulingStrategy = &pb.SchedulingStrategy{Kind: strategyPlacementGroup}
		}, []string{"scheduling_strategy.placement_group_id", "required"}},
		{"group id without the kind", func(r *pb.CreateActorRequest) {
			r.SchedulingStrategy = &pb.SchedulingStrategy{PlacementGroupId: "ab"}
		}, []string{"scheduling_strategy.placement_group_id", "PLACEMENT_GROUP"}},
		{"affinity without node", func(r *pb.CreateActorRequest) {
			r.SchedulingStrategy = &pb.SchedulingStrategy{Kind: strategyNodeAffinity}
		}, []string{"scheduling_strategy.node_id", "required"}},
		{"node id without the kind", func(r *pb.CreateActorRequest) {
			r.SchedulingStrategy = &pb.SchedulingStrategy{Kind: strategySpread, NodeId: "n1"}
		}, []string{"scheduling_strategy.node_id", "NODE_AFFINITY"}},
		{"no executable", func(r *pb.CreateActorRequest) { r.ExecutableSha256 = "" }, []string{"executable_sha256", "required"}},
		{"malformed executable", func(r *pb.CreateActorRequest) { r.ExecutableSha256 = "ABC" }, []string{"executable_sha256", `"ABC"`}},
		{"NUL in name", func(r *pb.CreateActorRequest) { r.Name = "a\x00b" }, []string{"name"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := valid()
			tc.mutate(req)
			_, err := checkActorRequest(req)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("%v, want InvalidArgument", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
	for _, kind := range []pb.SchedulingStrategyKind{strategyDefault, strategySpread} {
		req := valid()
		req.SchedulingStrategy = &pb.SchedulingStrategy{Kind: kind}
		req.MaxRestarts, req.MaxTaskRetries = -1, -1
		if _, err := checkActorRequest(req); err != nil {
			t.Errorf("kind %v: %v", kind, err)
		}
	}
}

func TestCreateActorLookupsAndNothingStoredOnError(t *testing.T) {
	st := store.NewMemory()
	f := newActorFixture(t, st)
	ctx := context.Background()
	group, err := f.c.pgs.CreatePlacementGroup(ctx, &pb.CreatePlacementGroupRequest{CreatorJobId: f.jobID, Strategy: "PACK",
		Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{{Resources: map[string]float64{"CPU": 2}}, {Resources: map[string]float64{"CPU": 1, "GPU": 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	pgID := group.PlacementGroup.PlacementGroupId
	removed, err := f.c.pgs.CreatePlacementGroup(ctx, &pb.CreatePlacementGroupRequest{CreatorJobId: f.jobID, Strategy: "PACK",
		Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{{Resources: map[string]float64{"CPU": 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.pgs.RemovePlacementGroup(ctx, &pb.RemovePlacementGroupRequest{PlacementGroupId: removed.PlacementGroup.PlacementGroupId}); err != nil {
		t.Fatal(err)
	}
	finished, err := f.c.jobs.AddJob(ctx, &pb.AddJobRequest{DriverPid: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.jobs.MarkJobFinished(ctx, &pb.MarkJobFinishedRequest{JobId: finished.Job.JobId}); err != nil {
		t.Fatal(err)
	}
	inGroup := func(id string, index int32, resources map[string]float64) func(*pb.CreateActorRequest) {
		return func(r *pb.CreateActorRequest) {
			r.SchedulingStrategy = &pb.SchedulingStrategy{Kind: strategyPlacementGroup, PlacementGroupId: id, BundleIndex: index}
			r.RequiredResources = resources
		}
	}
	missingSHA := sha256Hex([]byte("not uploaded"))
	cases := []struct {
		name   string
		mutate func(*pb.CreateActorRequest)
		code   codes.Code
		want   []string
	}{
		{"unknown job", func(r *pb.CreateActorRequest) { r.JobId = "ff000000" }, codes.InvalidArgument, []string{"job_id", "ff000000"}},
		{"finished job", func(r *pb.CreateActorRequest) { r.JobId = finished.Job.JobId }, codes.InvalidArgument, []string{"job_id", "finished"}},
		{"unknown group", inGroup("00ff", 0, nil), codes.NotFound, []string{"scheduling_strategy.placement_group_id", "00ff"}},
		{"removed group", inGroup(removed.PlacementGroup.PlacementGroupId, 0, nil), codes.InvalidArgument, []string{"scheduling_strategy.placement_group_id", "removed"}},
		{"bundle too small", inGroup(pgID, 1, map[string]float64{"GPU": 2}), codes.InvalidArgument, []string{"placement_group_bundle_index", "bundle 1", pgID}},
		{"no bundle fits", inGroup(pgID, -1, map[string]float64{"CPU": 3}), codes.InvalidArgument, []string{"bundle 0", "bundle 1", pgID}},
		{"bundle index out of range", inGroup(pgID, 2, nil), codes.InvalidArgument, []string{"placement_group_bundle_index", "0..1", "2"}},
		{"executable not uploaded", func(r *pb.CreateActorRequest) { r.ExecutableSha256 = missingSHA }, codes.FailedPrecondition, []string{"executable " + missingSHA + " not uploaded"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.c.actors.CreateActor(ctx, f.request(tc.mutate))
			if status.Code(err) != tc.code {
				t.Fatalf("%v, want %s", err, tc.code)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
	rows, err := st.GetAll(ctx, store.TableActors)
	if err != nil || len(rows) != 0 {
		t.Fatalf("refused requests stored %d actors (%v)", len(rows), err)
	}
	// A request that fits its bundle is accepted and waits for the group.
	actor := f.create(t, inGroup(pgID, 1, map[string]float64{"GPU": 1}))
	if actor.PlacementGroupId != pgID || actor.BundleIndex != 1 || actor.State != pb.ActorState_ACTOR_PENDING_CREATION || len(actor.ActorId) != 32 {
		t.Fatalf("accepted actor: %v", actor)
	}
	eventually(t, 5*time.Second, "pending reason names the group's bundle", func() error {
		got := f.get(t, actor.ActorId)
		if want := fmt.Sprintf("waiting for placement group %s bundle 1", pgID); got.PendingReason != want {
			return fmt.Errorf("pending_reason %q, want %q", got.PendingReason, want)
		}
		return nil
	})
}

func TestActorNamesAreUniqueAmongLiveActorsOfANamespace(t *testing.T) {
	f := newActorFixture(t, store.NewMemory())
	ctx := context.Background()
	named := func(name, namespace string) func(*pb.CreateActorRequest) {
		return func(r *pb.CreateActorRequest) { r.Name, r.Namespace = name, namespace }
	}
	first := f.create(t, named("counter", ""))
	if first.Namespace != "team" {
		t.Fatalf("namespace %q, want the job's namespace team", first.Namespace)
	}
	_, err := f.c.actors.CreateActor(ctx, f.request(named("counter", "team")))
	if status.Code(err) != codes.AlreadyExists || !strings.Contains(err.Error(), `"counter"`) || !strings.Contains(err.Error(), `"team"`) {
		t.Fatalf("second actor named counter in team: %v, want AlreadyExists naming name and namespace", err)
	}
	other := f.create(t, named("counter", "elsewhere"))
	found, err := f.c.actors.GetNamedActorInfo(ctx, &pb.GetNamedActorInfoRequest{Name: "counter", Namespace: "elsewhere"})
	if err != nil || found.Actor.ActorId != other.ActorId {
		t.Fatalf("GetNamedActorInfo elsewhere/counter: %v, %v", found, err)
	}
	if _, err := f.c.actors.GetNamedActorInfo(ctx, &pb.GetNamedActorInfoRequest{Name: "nobody", Namespace: "team"}); status.Code(err) != codes.NotFound {
		t.Fatalf("GetNamedActorInfo of an unknown name: %v, want NotFound", err)
	}
	if _, err := f.c.actors.KillActor(ctx, &pb.KillActorRequest{ActorId: first.ActorId, NoRestart: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.actors.GetNamedActorInfo(ctx, &pb.GetNamedActorInfoRequest{Name: "counter", Namespace: "team"}); status.Code(err) != codes.NotFound {
		t.Fatalf("GetNamedActorInfo of a DEAD actor's name: %v, want NotFound", err)
	}
	again := f.create(t, named("counter", "team"))
	all, err := f.c.actors.GetAllActorInfo(ctx, &pb.GetAllActorInfoRequest{})
	if err != nil || len(all.Actors) != 3 {
		t.Fatalf("GetAllActorInfo: %v, %v", all, err)
	}
	if !slices.IsSortedFunc(all.Actors, func(a, b *pb.ActorInfo) int {
		if a.StartTimeMs != b.StartTimeMs {
			return int(a.StartTimeMs - b.StartTimeMs)
		}
		return strings.Compare(a.ActorId, b.ActorId)
	}) {
		t.Errorf("actors not sorted by start time, then id: %v", all.Actors)
	}
	if !slices.ContainsFunc(all.Actors, func(a *pb.ActorInfo) bool { return a.ActorId == again.ActorId }) {
		t.Errorf("the new counter is not listed: %v", all.Actors)
	}
}

func TestKillActorRestartsThenBuries(t *testing.T) {
	f := newActorFixture(t, store.NewMemory())
	ctx := context.Background()
	actor := f.create(t, func(r *pb.CreateActorRequest) { r.MaxRestarts = 1 })

	waitCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err := f.c.actors.GetActorInfo(waitCtx, &pb.GetActorInfoRequest{ActorId: actor.ActorId, WaitAlive: true})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("wait_alive on an actor without nodes: %v, want DeadlineExceeded", err)
	}

	if _, err := f.c.actors.KillActor(ctx, &pb.KillActorRequest{ActorId: actor.ActorId}); err != nil {
		t.Fatal(err)
	}
	got := f.get(t, actor.ActorId)
	if got.State != pb.ActorState_ACTOR_RESTARTING || got.NumRestarts != 1 {
		t.Fatalf("after a kill with restarts left: %v", got)
	}

	// A waiter sees the death.
	done := make(chan *pb.ActorInfo, 1)
	go func() {
		reply, err := f.c.actors.GetActorInfo(ctx, &pb.GetActorInfoRequest{ActorId: actor.ActorId, WaitAlive: true})
		if err != nil {
			t.Error(err)
		}
		done <- reply.GetActor()
	}()
	time.Sleep(50 * time.Millisecond)
	if _, err := f.c.actors.KillActor(ctx, &pb.KillActorRequest{ActorId: actor.ActorId}); err != nil {
		t.Fatal(err)
	}
	select {
	case dead := <-done:
		want := "killed by KillActor; no restarts left (max_restarts=1)"
		if dead.GetState() != pb.ActorState_ACTOR_DEAD || dead.GetDeathCause() != want || dead.GetEndTimeMs() == 0 {
			t.Fatalf("waiter got %v, want DEAD with %q", dead, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("wait_alive did not return when the actor died")
	}
	// Killing a DEAD actor is a no-op; an unknown one is NotFound.
	if _, err := f.c.actors.KillActor(ctx, &pb.KillActorRequest{ActorId: actor.ActorId, NoRestart: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.actors.KillActor(ctx, &pb.KillActorRequest{ActorId: "00"}); status.Code(err) != codes.NotFound {
		t.Fatalf("KillActor of an unknown actor: %v", err)
	}
	if _, err := f.c.actors.GetActorInfo(ctx, &pb.GetActorInfoRequest{ActorId: "00"}); status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "actor_id") {
		t.Fatalf("GetActorInfo of an unknown actor: %v", err)
	}
}

func TestWorkerFailureReportsOfOtherWorkersAreIgnored(t *testing.T) {
	f := newActorFixture(t, store.NewMemory())
	ctx := context.Background()
	actor := f.create(t)
	if _, err := f.c.actors.ReportWorkerFailure(ctx, &pb.ReportWorkerFailureRequest{NodeId: "n", ActorId: actor.ActorId}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "worker_id") {
		t.Fatalf("report without worker_id: %v", err)
	}
	for _, req := range []*pb.ReportWorkerFailureRequest{
		{NodeId: "n", WorkerId: "w1", ActorId: actor.ActorId, ExitDetail: "exit status 2"},
		{NodeId: "n", WorkerId: "w1", ExitDetail: "signal: killed"},
		{NodeId: "n", WorkerId: "w1", ActorId: "unknown"},
	} {
		if _, err := f.c.actors.ReportWorkerFailure(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.get(t, actor.ActorId); got.State != pb.ActorState_ACTOR_PENDING_CREATION || got.NumRestarts != 0 {
		t.Fatalf("a report about a worker the actor does not run changed it: %v", got)
	}
}

func TestActorsDieWithTheirGroupAndTheirJob(t *testing.T) {
	f := newActorFixture(t, store.NewMemory())
	ctx := context.Background()
	group, err := f.c.pgs.CreatePlacementGroup(ctx, &pb.CreatePlacementGroupRequest{CreatorJobId: f.jobID, Strategy: "PACK", Lifetime: "detached",
		Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{{Resources: map[string]float64{"CPU": 2}}}})
	if err != nil {
		t.Fatal(err)
	}
	pgID := group.PlacementGroup.PlacementGroupId
	inGroup := f.create(t, func(r *pb.CreateActorRequest) {
		r.SchedulingStrategy = &pb.SchedulingStrategy{Kind: strategyPlacementGroup, PlacementGroupId: pgID, BundleIndex: -1}
		r.MaxRestarts = -1
	})
	plain := f.create(t)
	detached := f.create(t, func(r *pb.CreateActorRequest) { r.IsDetached = true; r.Name = "keeper" })

	if _, err := f.c.pgs.RemovePlacementGroup(ctx, &pb.RemovePlacementGroupRequest{PlacementGroupId: pgID}); err != nil {
		t.Fatal(err)
	}
	if got := f.get(t, inGroup.ActorId); got.State != pb.ActorState_ACTOR_DEAD || got.DeathCause != deathGroupRemoved {
		t.Fatalf("actor of a removed group: %v, want DEAD %q", got, deathGroupRemoved)
	}
	if _, err := f.c.jobs.MarkJobFinished(ctx, &pb.MarkJobFinishedRequest{JobId: f.jobID}); err != nil {
		t.Fatal(err)
	}
	if got := f.get(t, plain.ActorId); got.State != pb.ActorState_ACTOR_DEAD || got.DeathCause != deathJobFinished {
		t.Fatalf("actor of a finished job: %v, want DEAD %q", got, deathJobFinished)
	}
	if got := f.get(t, detached.ActorId); got.State != pb.ActorState_ACTOR_PENDING_CREATION {
		t.Fatalf("a detached actor died with its job: %v", got)
	}
	if got := f.get(t, inGroup.ActorId); got.DeathCause != deathGroupRemoved {
		t.Fatalf("a DEAD actor's cause changed: %q", got.DeathCause)
	}
}

func TestDeadActorsArePrunedByAgeAndCount(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	st := store.NewMemory()
	f := newActorFixture(t, st, func(c *Config) {
		c.Now = clock.Now
		c.MaxDeadActors = 2
		c.DeadActorRetention = 10 * time.Minute
	})
	ctx := context.Background()
	var ids []string
	for range 4 {
		a := f.create(t)
		ids = append(ids, a.ActorId)
		if _, err := f.c.actors.KillActor(ctx, &pb.KillActorRequest{ActorId: a.ActorId, NoRestart: true}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Minute)
	}
	live := f.create(t)
	listed := func() []string {
		all, err := f.c.actors.GetAllActorInfo(ctx, &pb.GetAllActorInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range all.Actors {
			out = append(out, a.ActorId)
		}
		slices.Sort(out)
		return out
	}
	stored := func() []string {
		rows, err := st.GetAll(ctx, store.TableActors)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for id := range rows {
			out = append(out, id)
		}
		slices.Sort(out)
		return out
	}
	sorted := func(ids ...string) []string { slices.Sort(ids); return ids }

	f.s.actors.pruneDead()
	if want := sorted(ids[2], ids[3], live.ActorId); !slices.Equal(listed(), want) || !slices.Equal(stored(), want) {
		t.Fatalf("after pruning by count: listed %v, stored %v, want %v", listed(), stored(), want)
	}
	// ids[i] died at minute i; the clock is at minute 4. At 12m1s, ids[2] is older than
	// the 10-minute retention and ids[3] is not.
	clock.Advance(8*time.Minute + time.Second)
	f.s.actors.pruneDead()
	if want := sorted(ids[3], live.ActorId); !slices.Equal(listed(), want) {
		t.Fatalf("at 12m1s: %v, want %v", listed(), want)
	}
	clock.Advance(time.Minute)
	f.s.actors.pruneDead()
	if want := []string{live.ActorId}; !slices.Equal(listed(), want) || !slices.Equal(stored(), want) {
		t.Fatalf("after the retention: listed %v, stored %v; want only the live actor", listed(), stored())
	}
}

func TestDeadActorsToPrune(t *testing.T) {
	dead := []deadActor{{"c", 3000}, {"a", 1000}, {"b", 2000}, {"d", 3000}}
	cases := []struct {
		name      string
		now       int64
		retention time.Duration
		max       int
		want      []string
	}{
		{"all young, room for all", 3000, time.Hour, 10, nil},
		{"count keeps the newest", 3000, time.Hour, 2, []string{"a", "b"}},
		{"count zero drops all", 3000, time.Hour, 0, []string{"a", "b", "c", "d"}},
		{"age", 4500, 2 * time.Second, 10, []string{"a", "b"}},
		{"age and count", 4500, 3 * time.Second, 1, []string{"a", "b", "c"}},
		{"nothing dead", 0, time.Hour, 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			input := dead
			if tc.name == "nothing dead" {
				input = nil
			}
			if got := deadActorsToPrune(input, tc.now, tc.retention, tc.max); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func parseResources(t *testing.T, amounts map[string]float64) resources.Set {
	t.Helper()
	set, err := resources.SetFromFloat(amounts)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func TestChooseActorNodes(t *testing.T) {
	cpu := func(n float64) map[string]float64 { return map[string]float64{"CPU": n} }
	node := func(id string, total, available float64) placement.WorkNode {
		return placement.WorkNode{ID: placement.NodeID(id), Total: parseResources(t, cpu(total)), Available: parseResources(t, cpu(available))}
	}
	draining := node("d", 64, 64)
	draining.Draining = true
	// Critical utilisation: a 0.75, b 0.25 (under scheduler_spread_threshold), c 0.75.
	nodes := []placement.WorkNode{node("a", 8, 2), node("b", 8, 6), node("c", 16, 4), draining}
	info := func(state pb.PlacementGroupState, bundleNodes ...string) *pb.PlacementGroupInfo {
		g := &pb.PlacementGroupInfo{PlacementGroupId: "pg1", State: state}
		for i, n := range bundleNodes {
			g.Bundles = append(g.Bundles, &pb.Bundle{BundleIndex: int32(i), NodeId: n})
		}
		return g
	}
	group := newWorkGroup(info(pb.PlacementGroupState_CREATED, "c", "a", "c", ""))
	pending := newWorkGroup(info(pb.PlacementGroupState_PENDING, "", "", "", ""))
	rescheduling := newWorkGroup(info(pb.PlacementGroupState_RESCHEDULING, "c", "", "a", ""))
	removed := newWorkGroup(info(pb.PlacementGroupState_REMOVED, "", "", "", ""))
	strategy := func(kind pb.SchedulingStrategyKind) *pb.SchedulingStrategy { return &pb.SchedulingStrategy{Kind: kind} }
	inGroup := func(index int32) *pb.SchedulingStrategy {
		return &pb.SchedulingStrategy{Kind: strategyPlacementGroup, PlacementGroupId: "pg1", BundleIndex: index}
	}
	affinity := func(id string, soft bool) *pb.SchedulingStrategy {
		return &pb.SchedulingStrategy{Kind: strategyNodeAffinity, NodeId: id, Soft: soft}
	}
	t1 := func(id string, bundle int32) leaseTarget { return leaseTarget{NodeID: id, BundleIndex: bundle} }
	// a and c tie above the threshold: the actor id orders them.
	const actorID = "actor-1"
	tied := []leaseTarget{t1("a", -1), t1("c", -1)}
	if ac := placement.ChooseNodes(placement.WorkRequest{ID: actorID, Resources: parseResources(t, cpu(1))}, []placement.WorkNode{nodes[0], nodes[2]}, nil); ac.Targets[0].Node == "c" {
		tied = []leaseTarget{t1("c", -1), t1("a", -1)}
	}
	cases := []struct {
		name       string
		strategy   *pb.SchedulingStrategy
		request    map[string]float64
		nodes      []placement.WorkNode
		group      *placement.WorkGroup
		want       []leaseTarget
		wait, fail string // substrings
	}{
		{"default: under the spread threshold first, draining left out", strategy(strategyDefault), cpu(1), nodes, nil, append([]leaseTarget{t1("b", -1)}, tied...), "", ""},
		{"default: only nodes with room", nil, cpu(3), nodes, nil, []leaseTarget{t1("b", -1), t1("c", -1)}, "", ""},
		{"default: no room now", strategy(strategyDefault), cpu(7), nodes, nil, nil, "no node has {CPU: 7} available now", ""},
		{"default: infeasible", strategy(strategyDefault), cpu(32), nodes, nil, nil, "infeasible", ""},
		{"default: zero request fits anywhere", strategy(strategyDefault), nil, nodes, nil, append([]leaseTarget{t1("b", -1)}, tied...), "", ""},
		{"default: no nodes", strategy(strategyDefault), cpu(1), nil, nil, nil, "no ALIVE node", ""},
		{"spread: round-robin from the cursor", strategy(strategySpread), cpu(1), nodes, nil, []leaseTarget{t1("b", -1), t1("c", -1), t1("a", -1)}, "", ""},
		{"group: the bundle's node", inGroup(1), cpu(1), nodes, group, []leaseTarget{t1("a", 1)}, "", ""},
		{"group: any bundle, distinct nodes in bundle order", inGroup(-1), nil, nodes, group, []leaseTarget{t1("c", -1), t1("a", -1)}, "", ""},
		{"group: bundle not placed", inGroup(3), nil, nodes, group, nil, "waiting for placement group pg1 bundle 3", ""},
		{"group: not created yet", inGroup(0), nil, nodes, pending, nil, "waiting for placement group pg1 bundle 0", ""},
		{"group: rescheduling keeps placed bundles", inGroup(2), nil, nodes, rescheduling, []leaseTarget{t1("a", 2)}, "", ""},
		{"group: rescheduling, lost bundle waits", inGroup(1), nil, nodes, rescheduling, nil, "waiting for placement group pg1 bundle 1", ""},
		{"group: bundle on a node no longer alive", inGroup(0), nil, nodes[:2], group, nil, "waiting for placement group pg1 bundle 0", ""},
		{"group: removed", inGroup(0), nil, nodes, removed, nil, "", deathGroupRemoved},
		{"group: unknown", inGroup(0), nil, nodes, nil, nil, "", deathGroupRemoved},
		{"affinity: the node", affinity("a", false), cpu(1), nodes, nil, []leaseTarget{t1("a", -1)}, "", ""},
		{"affinity soft: the node, then default", affinity("a", true), cpu(1), nodes, nil, []leaseTarget{t1("a", -1), t1("b", -1), t1("c", -1)}, "", ""},
		{"affinity hard: no room waits", affinity("a", false), cpu(3), nodes, nil, nil, "node a does not have {CPU: 3} available now", ""},
		{"affinity soft: no room falls back", affinity("a", true), cpu(3), nodes, nil, []leaseTarget{t1("b", -1), t1("c", -1)}, "", ""},
		{"affinity hard: dead node fails", affinity("zz", false), cpu(1), nodes, nil, nil, "", "node zz is not ALIVE"},
		{"affinity soft: dead node falls back", affinity("zz", true), cpu(1), nodes, nil, append([]leaseTarget{t1("b", -1)}, tied...), "", ""},
		{"affinity hard: never fits fails", affinity("a", false), cpu(9), nodes, nil, nil, "", "node a can never hold {CPU: 9}"},
		{"affinity hard: draining waits", affinity("d", false), cpu(1), nodes, nil, nil, "node d is draining", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := chooseActorNodes(workRequest(actorID, tc.strategy, parseResources(t, tc.request), 1), tc.nodes, tc.group)
			if !slices.Equal(got.Targets, tc.want) {
				t.Errorf("targets %v, want %v", got.Targets, tc.want)
			}
			if (tc.wait == "") != (got.Wait == "") || !strings.Contains(got.Wait, tc.wait) {
				t.Errorf("wait %q, want %q", got.Wait, tc.wait)
			}
			if (tc.fail == "") != (got.Fail == "") || !strings.Contains(got.Fail, tc.fail) {
				t.Errorf("fail %q, want %q", got.Fail, tc.fail)
			}
		})
	}
}

// keepOpenStore lets two GCS incarnations share one memory store: Stop closes the store.
type keepOpenStore struct{ store.Store }

func (keepOpenStore) Close() error { return nil }

func TestActorTableSurvivesARestart(t *testing.T) {
	backends := map[string]func(t *testing.T) store.Store{
		"memory": func(t *testing.T) store.Store { return keepOpenStore{store.NewMemory()} },
		"redis": func(t *testing.T) store.Store {
			redis := redisserver.Start(t)
			cfg := store.DefaultRedisConfig()
			cfg.Address, cfg.Namespace = redis.Addr, "actor-restart-test"
			st, err := store.NewRedis(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			return keepOpenStore{st}
		},
	}
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			ctx := context.Background()
			long := func(c *Config) { c.ReconnectGrace = time.Hour }
			f := newActorFixture(t, st, long)
			pending := f.create(t, func(r *pb.CreateActorRequest) { r.Name = "keeper"; r.MaxRestarts = 3 })
			killed := f.create(t)
			if _, err := f.c.actors.KillActor(ctx, &pb.KillActorRequest{ActorId: killed.ActorId, NoRestart: true}); err != nil {
				t.Fatal(err)
			}
			restarting := f.create(t, func(r *pb.CreateActorRequest) { r.MaxRestarts = -1 })
			if _, err := f.c.actors.KillActor(ctx, &pb.KillActorRequest{ActorId: restarting.ActorId}); err != nil {
				t.Fatal(err)
			}
			// ALIVE rows as a GCS that placed them would have written them: on a node that
			// is still ALIVE in the node table, and on one that is gone.
			alive := &pb.NodeInfo{NodeId: "node-alive", RayletAddress: "127.0.0.1:1", State: pb.NodeState_ALIVE, ResourcesTotal: map[string]float64{"CPU": 4}}
			raw, _ := proto.Marshal(alive)
			if err := st.Put(ctx, store.TableNodes, alive.NodeId, raw); err != nil {
				t.Fatal(err)
			}
			aliveRow := func(id, node string, maxRestarts int64) *pb.ActorInfo {
				return &pb.ActorInfo{ActorId: id, JobId: f.jobID, ClassName: "Counter", Namespace: "team", State: pb.ActorState_ACTOR_ALIVE,
					NodeId: node, Pid: 42, WorkerId: "w-" + id, Address: "127.0.0.1:2", MaxRestarts: maxRestarts, BundleIndex: -1,
					SchedulingStrategy: &pb.SchedulingStrategy{Kind: strategyDefault}, StartTimeMs: 1, ExecutableSha256: f.sha}
			}
			for _, row := range []*pb.ActorInfo{aliveRow("aa", "node-alive", 0), aliveRow("bb", "node-gone", 0), aliveRow("cc", "node-gone", -1)} {
				raw, _ := proto.Marshal(row)
				if err := st.Put(ctx, store.TableActors, row.ActorId, raw); err != nil {
					t.Fatal(err)
				}
			}
			f.s.Stop()

			second := startGCS(t, st, long)
			c := dialActors(t, second.Address())
			all, err := c.actors.GetAllActorInfo(ctx, &pb.GetAllActorInfoRequest{})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]*pb.ActorInfo{}
			for _, a := range all.Actors {
				got[a.ActorId] = a
			}
			if len(got) != 6 {
				t.Fatalf("reloaded %d actors, want 6: %v", len(got), all.Actors)
			}
			if a := got[pending.ActorId]; a.State != pb.ActorState_ACTOR_PENDING_CREATION || a.Name != "keeper" || a.MaxRestarts != 3 ||
				len(a.ConstructorArgs) != 1 || a.ExecutableSha256 != f.sha {
				t.Errorf("pending actor after restart: %v", a)
			}
			if a := got[killed.ActorId]; a.State != pb.ActorState_ACTOR_DEAD || a.DeathCause != deathKilled {
				t.Errorf("killed actor after restart: %v", a)
			}
			if a := got[restarting.ActorId]; a.State != pb.ActorState_ACTOR_RESTARTING || a.NumRestarts != 1 {
				t.Errorf("restarting actor after restart: %v", a)
			}
			if a := got["aa"]; a.State != pb.ActorState_ACTOR_ALIVE || a.NodeId != "node-alive" || a.Pid != 42 {
				t.Errorf("ALIVE actor on an ALIVE node after restart: %v", a)
			}
			if a := got["bb"]; a.State != pb.ActorState_ACTOR_DEAD || a.DeathCause != "node node-gone died; no restarts left (max_restarts=0)" {
				t.Errorf("ALIVE actor on a gone node without restarts: %v", a)
			}
			if a := got["cc"]; a.State != pb.ActorState_ACTOR_RESTARTING || a.NumRestarts != 1 || a.NodeId != "" || a.Pid != 0 {
				t.Errorf("ALIVE actor on a gone node with restarts: %v", a)
			}
			_, err = c.actors.CreateActor(ctx, f.request(func(r *pb.CreateActorRequest) { r.Name = "keeper" }))
			if status.Code(err) != codes.AlreadyExists {
				t.Errorf("the reloaded name is free again: %v", err)
			}
			// The reloaded node's death reaches its actors.
			second.nodes.markDead("node-alive", "test")
			if a := (actorFixture{c: c}).get(t, "aa"); a.State != pb.ActorState_ACTOR_DEAD || a.DeathCause != "node node-alive died; no restarts left (max_restarts=0)" {
				t.Errorf("actor of a node that died after the restart: %v", a)
			}
		})
	}
}

// hookStore runs a hook, once, before the next read of one table.
type hookStore struct {
	store.Store
	table  string
	before atomic.Pointer[func()]
}

func (s *hookStore) Get(ctx context.Context, table, key string) ([]byte, bool, error) {
	if table == s.table {
		if hook := s.before.Swap(nil); hook != nil {
			(*hook)()
		}
	}
	return s.Store.Get(ctx, table, key)
}

// A job that finishes while CreateActor runs (after its job check, before its insert)
// has swept its actors already: CreateActor buries the new actor itself unless detached.
func TestCreateActorRacingTheJobsEnd(t *testing.T) {
	cases := []struct {
		name     string
		detached bool
		state    pb.ActorState
		cause    string
	}{
		{"not detached dies with its job", false, pb.ActorState_ACTOR_DEAD, deathJobFinished},
		{"detached outlives its job", true, pb.ActorState_ACTOR_PENDING_CREATION, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := &hookStore{Store: store.NewMemory(), table: store.TableExecutables}
			f := newActorFixture(t, st)
			finished := false
			// CreateActor reads the executable's manifest between its job check and its
			// insert: the job finishes there.
			hook := func() {
				finished = true
				if err := f.s.jobs.finish(context.Background(), f.jobID, "test: driver exited"); err != nil {
					t.Error(err)
				}
			}
			st.before.Store(&hook)
			actor := f.create(t, func(r *pb.CreateActorRequest) { r.IsDetached = tc.detached })
			if !finished || !f.s.jobs.get(f.jobID).IsDead {
				t.Fatal("the job did not finish during CreateActor")
			}
			for what, got := range map[string]*pb.ActorInfo{"CreateActor reply": actor, "GetActorInfo": f.get(t, actor.ActorId)} {
				if got.State != tc.state || got.DeathCause != tc.cause {
					t.Errorf("%s: state %s, death cause %q; want %s, %q", what, got.State, got.DeathCause, tc.state, tc.cause)
				}
			}
		})
	}
}

// fakeRaylet is a NodeManagerService that records KillWorker and GetWorkers calls.
type fakeRaylet struct {
	pb.UnimplementedNodeManagerServiceServer
	addr string
	// killAnswer is the error KillWorker call n (from 0) answers; nil kills.
	killAnswer func(n int) error
	// workers is what GetWorkers lists; GetWorkers waits for the first worker lease.
	workers []*pb.WorkerInfo
	// leased is closed at the first RequestWorkerLease, which blocks until it is
	// cancelled (a placement that takes long).
	leased    chan struct{}
	leaseOnce sync.Once

	mu             sync.Mutex
	killCalls      int
	killed         []string
	getWorkerCalls int
}

func startFakeRaylet(t *testing.T, r *fakeRaylet) *fakeRaylet {
	t.Helper()
	r.leased = make(chan struct{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(rpcutil.ServerOptions(rpcutil.ProtocolVersion)...)
	pb.RegisterNodeManagerServiceServer(srv, r)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	r.addr = lis.Addr().String()
	return r
}

func (r *fakeRaylet) KillWorker(ctx context.Context, req *pb.KillWorkerRequest) (*pb.KillWorkerReply, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.killCalls
	r.killCalls++
	if r.killAnswer != nil {
		if err := r.killAnswer(n); err != nil {
			return nil, err
		}
	}
	r.killed = append(r.killed, req.WorkerId)
	return &pb.KillWorkerReply{}, nil
}

func (r *fakeRaylet) RequestWorkerLease(ctx context.Context, req *pb.RequestWorkerLeaseRequest) (*pb.RequestWorkerLeaseReply, error) {
	r.leaseOnce.Do(func() { close(r.leased) })
	<-ctx.Done()
	return nil, status.FromContextError(ctx.Err()).Err()
}

func (r *fakeRaylet) GetWorkers(ctx context.Context, _ *pb.GetWorkersRequest) (*pb.GetWorkersReply, error) {
	select {
	case <-r.leased:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.getWorkerCalls++
	return &pb.GetWorkersReply{Workers: r.workers}, nil
}

// calls returns the KillWorker calls, the workers killed and the GetWorkers calls so far.
func (r *fakeRaylet) calls() (kills int, killed []string, getWorkers int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.killCalls, slices.Clone(r.killed), r.getWorkerCalls
}

// A raylet that reconnects while an actor is being placed lists a worker of that actor
// that may be the placement's own: the GCS checks again, however long the placement
// takes, and kills the worker once the actor turns out not to run on it.
func TestReconcileWaitsForALongPlacement(t *testing.T) {
	f := newActorFixture(t, store.NewMemory())
	f.s.actors.reconcileRetry = 5 * time.Millisecond
	ctx := context.Background()
	actor := f.create(t)
	raylet := startFakeRaylet(t, &fakeRaylet{
		workers: []*pb.WorkerInfo{{WorkerId: "w-old", Address: "127.0.0.1:1", NodeId: "n1", JobId: f.jobID, ActorId: actor.ActorId, Leased: true}},
	})
	cpu := map[string]float64{"CPU": 4}
	if _, err := f.c.nodes.RegisterNode(ctx, &pb.RegisterNodeRequest{Node: &pb.NodeInfo{NodeId: "n1", RayletAddress: raylet.addr,
		ResourcesTotal: cpu, ResourcesAvailable: cpu}}); err != nil {
		t.Fatal(err)
	}
	// The lease blocks: the actor stays placing, and w-old undecided, for many rounds
	// (more than the 5 rounds the GCS used to give up after).
	eventually(t, 10*time.Second, "reconcile rounds go on while the placement runs", func() error {
		if _, _, rounds := raylet.calls(); rounds < 20 {
			return fmt.Errorf("%d GetWorkers calls", rounds)
		}
		return nil
	})
	if _, killed, _ := raylet.calls(); len(killed) != 0 {
		t.Fatalf("killed %v while the placement could still be using it", killed)
	}
	// The placement ends without w-old: w-old is an orphan.
	if _, err := f.c.actors.KillActor(ctx, &pb.KillActorRequest{ActorId: actor.ActorId, NoRestart: true}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the leftover worker is killed", func() error {
		if _, killed, _ := raylet.calls(); !slices.Contains(killed, "w-old") {
			return fmt.Errorf("killed %v, want w-old", killed)
		}
		return nil
	})
}

// logBuffer collects a server's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) has(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Contains(b.buf.String(), s)
}

// The worker of an actor killed with KillActor is killed on its raylet even when the
// raylet cannot be reached at first; the GCS stops trying when the raylet refuses or
// the node dies.
func TestKillWorkerRetriesUntilTheRayletAnswers(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "connection refused")
	cases := []struct {
		name   string
		answer func(n int) error
		// killNodeAfter marks the node DEAD after that many KillWorker calls (0: never).
		killNodeAfter int
		wantKilled    bool
		wantCalls     int    // exact, when not 0
		wantLog       string // the line that ends the retries, when not killed
	}{
		{"transient errors, then the raylet answers", func(n int) error {
			return []error{unavailable, status.Error(codes.DeadlineExceeded, "slow"), unavailable, nil}[n]
		}, 0, true, 4, ""},
		{"the raylet refuses", func(int) error { return status.Error(codes.FailedPrecondition, "stale epoch") }, 0, false, 1, "KillWorker failed"},
		{"the node dies while unreachable", func(int) error { return unavailable }, 3, false, 0, "the node is not ALIVE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raylet := startFakeRaylet(t, &fakeRaylet{killAnswer: tc.answer})
			st := store.NewMemory()
			ctx := context.Background()
			// An ALIVE actor on the raylet's node, as a GCS that placed it wrote it.
			node := &pb.NodeInfo{NodeId: "n1", RayletAddress: raylet.addr, State: pb.NodeState_ALIVE, ResourcesTotal: map[string]float64{"CPU": 4}}
			job := &pb.JobInfo{JobId: "01000000", Namespace: "team", StartTimeMs: 1}
			actor := &pb.ActorInfo{ActorId: "aa", JobId: job.JobId, ClassName: "Counter", Namespace: "team", State: pb.ActorState_ACTOR_ALIVE,
				NodeId: "n1", Pid: 42, WorkerId: "w1", Address: "127.0.0.1:1", BundleIndex: -1,
				SchedulingStrategy: &pb.SchedulingStrategy{Kind: strategyDefault}, StartTimeMs: 1}
			for _, row := range []struct {
				table, key string
				msg        proto.Message
			}{{store.TableNodes, node.NodeId, node}, {store.TableJobs, job.JobId, job}, {store.TableActors, actor.ActorId, actor}} {
				raw, _ := proto.Marshal(row.msg)
				if err := st.Put(ctx, row.table, row.key, raw); err != nil {
					t.Fatal(err)
				}
			}
			logs := &logBuffer{}
			s := startGCS(t, st, func(c *Config) {
				c.ReconnectGrace = time.Hour
				c.Logger = zerolog.New(logs)
			})
			s.actors.killRetry = rpcutil.Backoff{Min: time.Millisecond, Max: 10 * time.Millisecond}
			c := dialActors(t, s.Address())
			if _, err := c.actors.KillActor(ctx, &pb.KillActorRequest{ActorId: "aa", NoRestart: true}); err != nil {
				t.Fatal(err)
			}
			if tc.killNodeAfter > 0 {
				eventually(t, 10*time.Second, "KillWorker retries", func() error {
					if calls, _, _ := raylet.calls(); calls < tc.killNodeAfter {
						return fmt.Errorf("%d KillWorker calls", calls)
					}
					return nil
				})
				s.nodes.markDead("n1", "test")
			}
			eventually(t, 10*time.Second, "KillWorker ends", func() error {
				if _, killed, _ := raylet.calls(); tc.wantKilled && !slices.Equal(killed, []string{"w1"}) {
					return fmt.Errorf("killed %v, want w1", killed)
				}
				if !tc.wantKilled && !logs.has(tc.wantLog) {
					return fmt.Errorf("no log %q", tc.wantLog)
				}
				return nil
			})
			// Killed or given up: the retries are over, so the count is final.
			if calls, killed, _ := raylet.calls(); tc.wantCalls != 0 && calls != tc.wantCalls || !tc.wantKilled && len(killed) != 0 {
				t.Fatalf("%d KillWorker calls, killed %v; want %d calls", calls, killed, tc.wantCalls)
			}
		})
	}
}
