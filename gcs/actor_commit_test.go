package gcs

import (
	"context"
	"errors"
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
	"github.com/raygo-dev/raygo/internal/rpcutil"
	"github.com/raygo-dev/raygo/internal/testutil/logbuf"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

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
	r.addr = serveFake(t, func(srv *grpc.Server) { pb.RegisterNodeManagerServiceServer(srv, r) })
	return r
}

// serveFake serves the services register adds on a loopback port, with raygo's server
// options, until the test ends, and returns the address.
func serveFake(t *testing.T, register func(*grpc.Server)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serverOptions, err := rpcutil.ServerOptions(rpcutil.ProtocolVersion, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(serverOptions...)
	register(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
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
			logs := &logbuf.Buffer{}
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
				if !tc.wantKilled && !logs.Has(tc.wantLog) {
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

// actorRowsDown is a store whose actor rows cannot be written while down is set.
type actorRowsDown struct {
	store.Store
	down atomic.Bool
}

func (s *actorRowsDown) Put(ctx context.Context, table, key string, value []byte) error {
	if table == store.TableActors && s.down.Load() {
		return errors.New("store down")
	}
	return s.Store.Put(ctx, table, key, value)
}

// leasingRaylet grants every worker lease with the one fake worker it serves, whose
// constructor calls succeed.
type leasingRaylet struct {
	*fakeRaylet
	pb.UnimplementedCoreWorkerServiceServer
	workerAddr string
	leases     atomic.Int32
}

func (r *leasingRaylet) RequestWorkerLease(ctx context.Context, req *pb.RequestWorkerLeaseRequest) (*pb.RequestWorkerLeaseReply, error) {
	n := r.leases.Add(1)
	return &pb.RequestWorkerLeaseReply{Worker: &pb.WorkerInfo{WorkerId: fmt.Sprintf("w%d", n), Address: r.workerAddr, NodeId: "n1", Pid: 100 + int64(n)}}, nil
}

func (r *leasingRaylet) CreateActor(ctx context.Context, req *pb.CreateActorOnWorkerRequest) (*pb.CreateActorOnWorkerReply, error) {
	return &pb.CreateActorOnWorkerReply{}, nil
}

// An actor whose ALIVE row cannot be saved is not ALIVE: nobody learns of that worker
// (a GCS restarted then would create the actor again, and a caller that followed the
// first worker would call a dead one); the worker is killed and the actor placed again
// once the store is back.
func TestAnActorWhoseAliveRowCannotBeSavedIsNotAlive(t *testing.T) {
	st := &actorRowsDown{Store: store.NewMemory()}
	f := newActorFixture(t, st)
	f.s.actors.killRetry = rpcutil.Backoff{Min: time.Millisecond, Max: 10 * time.Millisecond}
	ctx := context.Background()
	actor := f.create(t)

	r := &leasingRaylet{fakeRaylet: &fakeRaylet{}}
	r.addr = serveFake(t, func(srv *grpc.Server) {
		pb.RegisterNodeManagerServiceServer(srv, r)
		pb.RegisterCoreWorkerServiceServer(srv, r)
	})
	r.workerAddr = r.addr

	st.down.Store(true)
	cpu := map[string]float64{"CPU": 4}
	if _, err := f.c.nodes.RegisterNode(ctx, &pb.RegisterNodeRequest{Node: &pb.NodeInfo{NodeId: "n1", RayletAddress: r.addr,
		ResourcesTotal: cpu, ResourcesAvailable: cpu}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a worker leased, its actor not saved and the worker killed", func() error {
		if _, killed, _ := r.calls(); !slices.Contains(killed, "w1") {
			return fmt.Errorf("killed %v", killed)
		}
		return nil
	})
	if got := f.get(t, actor.ActorId); got.State == pb.ActorState_ACTOR_ALIVE || got.WorkerId != "" {
		t.Fatalf("the actor is %v on worker %q though its row could not be saved", got.State, got.WorkerId)
	}
	st.down.Store(false)
	eventually(t, 10*time.Second, "the actor ALIVE once the store is back", func() error {
		if got := f.get(t, actor.ActorId); got.State != pb.ActorState_ACTOR_ALIVE {
			return fmt.Errorf("%v (%s)", got.State, got.PendingReason)
		}
		return nil
	})
	raw, found, err := st.Store.Get(ctx, store.TableActors, actor.ActorId)
	saved := &pb.ActorInfo{}
	if err != nil || !found || proto.Unmarshal(raw, saved) != nil || saved.State != pb.ActorState_ACTOR_ALIVE || saved.WorkerId != f.get(t, actor.ActorId).WorkerId {
		t.Fatalf("the saved row is %v (%v, found %v), want the ALIVE one", saved, err, found)
	}
}
