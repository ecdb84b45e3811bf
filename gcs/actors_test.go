package gcs

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	"github.com/raygo-dev/raygo/internal/testutil/poll"
	"github.com/raygo-dev/raygo/internal/testutil/redisserver"
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
	dead := []deadRow{{"c", 3000}, {"a", 1000}, {"b", 2000}, {"d", 3000}}
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
			if got := deadRowsToPrune(input, tc.now, tc.retention, tc.max); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// keepOpenStore lets two GCS incarnations share one memory store: Stop closes the store.
type keepOpenStore struct{ store.Store }

func (keepOpenStore) Close() error { return nil }

// A kill answered OK must hold across a GCS restart: while Redis is down the kill fails
// with Unavailable and changes nothing (before, it was answered OK and the actor came
// back ALIVE or PENDING after the restart).
func TestAKillTheStoreCannotSaveFailsAndChangesNothing(t *testing.T) {
	redis := redisserver.Start(t)
	cfg := store.DefaultRedisConfig()
	cfg.Address, cfg.Namespace = redis.Addr, "actor-kill-test"
	opened, err := store.NewRedis(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := keepOpenStore{opened}
	ctx := context.Background()
	long := func(c *Config) { c.ReconnectGrace = time.Hour }
	f := newActorFixture(t, st, long)
	actor := f.create(t)

	redis.Kill()
	_, err = f.c.actors.KillActor(ctx, &pb.KillActorRequest{ActorId: actor.ActorId, NoRestart: true})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("kill while Redis is down: %v, want Unavailable", err)
	}
	info, err := f.c.actors.GetActorInfo(ctx, &pb.GetActorInfoRequest{ActorId: actor.ActorId})
	if err != nil {
		t.Fatal(err)
	}
	if info.Actor.State == pb.ActorState_ACTOR_DEAD {
		t.Fatalf("a kill that failed made the actor DEAD: %v", info.Actor)
	}
	redis.Restart()
	if _, err := f.c.actors.KillActor(ctx, &pb.KillActorRequest{ActorId: actor.ActorId, NoRestart: true}); err != nil {
		t.Fatalf("kill once Redis is back: %v", err)
	}
	f.s.Stop()
	second := startGCS(t, st, long)
	reloaded, err := dialActors(t, second.Address()).actors.GetActorInfo(ctx, &pb.GetActorInfoRequest{ActorId: actor.ActorId})
	if err != nil {
		t.Fatal(err)
	}
	if reloaded.Actor.State != pb.ActorState_ACTOR_DEAD || reloaded.Actor.DeathCause != deathKilled {
		t.Fatalf("the acknowledged kill did not survive a GCS restart: %v", reloaded.Actor)
	}
}

func TestActorTableSurvivesARestart(t *testing.T) {
	backends := map[string]func(t *testing.T) store.Store{
		"memory": func(t *testing.T) store.Store { return keepOpenStore{store.NewMemory()} },
		"redis":  func(t *testing.T) store.Store { return redisStore(t, "actor-restart-test") },
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
