package gcs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/gcs/store"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

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
		// A Python actor runs its interpreter: no executable, and its class's key.
		{"python actor with an executable", func(r *pb.CreateActorRequest) {
			r.PythonWorker, r.PythonClassKey = &pb.PythonWorker{Interpreter: "/usr/bin/python3"}, "RemoteFunction:01000000:ab"
		}, []string{"executable_sha256", "python_worker"}},
		{"python actor without its class", func(r *pb.CreateActorRequest) {
			r.ExecutableSha256, r.PythonWorker = "", &pb.PythonWorker{Interpreter: "/usr/bin/python3"}
		}, []string{"python_class_key", "required"}},
		{"NUL in name", func(r *pb.CreateActorRequest) { r.Name = "a\x00b" }, []string{"name"}},
		{"name over 1 KiB", func(r *pb.CreateActorRequest) { r.Name = strings.Repeat("n", maxNameBytes+1) }, []string{"name", "1024"}},
		{"namespace over 1 KiB", func(r *pb.CreateActorRequest) { r.Namespace = strings.Repeat("n", maxNameBytes+1) }, []string{"namespace"}},
		{"NUL in class name", func(r *pb.CreateActorRequest) { r.ClassName = "C\x00" }, []string{"class_name"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := valid()
			tc.mutate(req)
			_, err := checkActorRequest(req)
			if status.Code(statusOf(err)) != codes.InvalidArgument {
				t.Fatalf("%v, want InvalidArgument", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
	python := &pb.CreateActorRequest{JobId: "01000000", ClassName: "Counter", PythonClassKey: "RemoteFunction:01000000:ab",
		PythonWorker: &pb.PythonWorker{Interpreter: "/usr/bin/python3"}}
	if _, err := checkActorRequest(python); err != nil {
		t.Errorf("a Python actor: %v", err)
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

// ChooseLeaseTargets answers with the actor scheduler's choice over the registered
// nodes, their raylet addresses, and a reason when no node has room.
func TestChooseLeaseTargets(t *testing.T) {
	f := newActorFixture(t, store.NewMemory())
	ctx := context.Background()
	register := func(id, address string, total, available float64) {
		t.Helper()
		node := &pb.NodeInfo{NodeId: id, RayletAddress: address,
			ResourcesTotal: map[string]float64{"CPU": total}, ResourcesAvailable: map[string]float64{"CPU": available}}
		if _, err := f.c.nodes.RegisterNode(ctx, &pb.RegisterNodeRequest{Node: node}); err != nil {
			t.Fatal(err)
		}
	}
	// n1 is 75% used, n2 25% (under the spread threshold), n3 small.
	register("n1", "127.0.0.1:11", 8, 2)
	register("n2", "127.0.0.1:12", 8, 6)
	register("n3", "127.0.0.1:13", 1, 1)
	choose := func(cpus float64, strategy *pb.SchedulingStrategy) *pb.ChooseLeaseTargetsReply {
		t.Helper()
		reply, err := f.c.actors.ChooseLeaseTargets(ctx, &pb.ChooseLeaseTargetsRequest{RequestId: "key-1",
			Resources: map[string]float64{"CPU": cpus}, SchedulingStrategy: strategy})
		if err != nil {
			t.Fatal(err)
		}
		return reply
	}
	addresses := func(reply *pb.ChooseLeaseTargetsReply) []string {
		var out []string
		for _, target := range reply.Targets {
			out = append(out, target.RayletAddress)
		}
		return out
	}

	if got := choose(2, nil); got.Outcome != pb.LeaseOutcome_LEASE_OUTCOME_PLACED ||
		!slices.Equal(addresses(got), []string{"127.0.0.1:12", "127.0.0.1:11"}) || !got.Targets[0].AvailableNow {
		t.Errorf("DEFAULT: %v", got)
	} else if len(got.Rejected) != 1 || got.Rejected[0].NodeId != "n3" || got.Rejected[0].Code != "insufficient_total" {
		t.Errorf("DEFAULT rejections: %v", got.Rejected)
	}
	if got := choose(7, nil); got.Outcome != pb.LeaseOutcome_LEASE_OUTCOME_NOT_NOW || len(got.Targets) != 2 ||
		got.Targets[0].AvailableNow || !strings.Contains(got.Reason, "available now") {
		t.Errorf("DEFAULT without room: %v", got)
	}
	if got := choose(64, nil); got.Outcome != pb.LeaseOutcome_LEASE_OUTCOME_INFEASIBLE || len(got.Targets) != 0 || !strings.Contains(got.Reason, "infeasible") {
		t.Errorf("DEFAULT, too large: %v", got)
	}
	spread := &pb.SchedulingStrategy{Kind: strategySpread}
	first, second := choose(1, spread), choose(1, spread)
	if first.Targets[0].NodeId == second.Targets[0].NodeId {
		t.Errorf("SPREAD led twice with %s", first.Targets[0].NodeId)
	}
	if got := choose(1, &pb.SchedulingStrategy{Kind: strategyNodeAffinity, NodeId: "gone"}); got.Outcome != pb.LeaseOutcome_LEASE_OUTCOME_UNSCHEDULABLE ||
		got.ReasonCode != "dead" || !strings.Contains(got.Reason, "node gone is not ALIVE") {
		t.Errorf("hard affinity to a missing node: %v", got)
	}
	if got := choose(1, &pb.SchedulingStrategy{Kind: strategyPlacementGroup, PlacementGroupId: "ab", BundleIndex: -1}); got.Outcome != pb.LeaseOutcome_LEASE_OUTCOME_UNSCHEDULABLE ||
		got.ReasonCode != "group_removed" {
		t.Errorf("unknown placement group: %v", got)
	}
	_, err := f.c.actors.ChooseLeaseTargets(ctx, &pb.ChooseLeaseTargetsRequest{Resources: map[string]float64{"CPU": -1}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `resources["CPU"]`) {
		t.Errorf("negative CPU: %v", err)
	}
	_, err = f.c.actors.ChooseLeaseTargets(ctx, &pb.ChooseLeaseTargetsRequest{SchedulingStrategy: &pb.SchedulingStrategy{Kind: strategyNodeAffinity}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "scheduling_strategy.node_id") {
		t.Errorf("affinity without a node: %v", err)
	}
}

// ChooseLeaseTargets honours a strategy's label selectors over the registered nodes'
// labels, and refuses malformed or misplaced ones naming the field.
func TestChooseLeaseTargetsLabelSelectors(t *testing.T) {
	f := newActorFixture(t, store.NewMemory())
	ctx := context.Background()
	for _, n := range []struct{ id, address, zone string }{{"n1", "127.0.0.1:11", "a"}, {"n2", "127.0.0.1:12", "b"}} {
		node := &pb.NodeInfo{NodeId: n.id, RayletAddress: n.address, Labels: map[string]string{"zone": n.zone},
			ResourcesTotal: map[string]float64{"CPU": 8}, ResourcesAvailable: map[string]float64{"CPU": 8}}
		if _, err := f.c.nodes.RegisterNode(ctx, &pb.RegisterNodeRequest{Node: node}); err != nil {
			t.Fatal(err)
		}
	}
	choose := func(strategy *pb.SchedulingStrategy) (*pb.ChooseLeaseTargetsReply, error) {
		return f.c.actors.ChooseLeaseTargets(ctx, &pb.ChooseLeaseTargetsRequest{RequestId: "key-1",
			Resources: map[string]float64{"CPU": 1}, SchedulingStrategy: strategy})
	}
	targets := func(reply *pb.ChooseLeaseTargetsReply) []string {
		var out []string
		for _, target := range reply.Targets {
			out = append(out, target.NodeId)
		}
		return out
	}
	if got, err := choose(&pb.SchedulingStrategy{LabelSelector: map[string]string{"zone": "b"}}); err != nil || !slices.Equal(targets(got), []string{"n2"}) {
		t.Errorf("hard zone b: %v %v", got, err)
	}
	if got, err := choose(&pb.SchedulingStrategy{SoftLabelSelector: map[string]string{"zone": "b"}}); err != nil || !slices.Equal(targets(got), []string{"n2", "n1"}) {
		t.Errorf("soft zone b: %v %v", got, err)
	}
	got, err := choose(&pb.SchedulingStrategy{LabelSelector: map[string]string{"zone": "in(c,d)"}})
	if err != nil || got.Outcome != pb.LeaseOutcome_LEASE_OUTCOME_INFEASIBLE || !strings.Contains(got.Reason, "label_selector {zone: in(c,d)}") {
		t.Errorf("no node in zone c or d: %v %v", got, err)
	}
	for _, tc := range []struct {
		strategy *pb.SchedulingStrategy
		want     string
	}{
		{&pb.SchedulingStrategy{LabelSelector: map[string]string{"zone": "in(a,"}}, `scheduling_strategy.label_selector["zone"]`},
		{&pb.SchedulingStrategy{SoftLabelSelector: map[string]string{"bad key!": "a"}}, `scheduling_strategy.soft_label_selector["bad key!"]`},
		{&pb.SchedulingStrategy{Kind: strategyNodeAffinity, NodeId: "n1", LabelSelector: map[string]string{"zone": "a"}}, "scheduling_strategy.label_selector: only used with kind DEFAULT or SPREAD"},
	} {
		if _, err := choose(tc.strategy); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want InvalidArgument naming %s", tc.strategy, err, tc.want)
		}
	}
}
