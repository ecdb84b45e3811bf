package gcs

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"strings"
	"sync"
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

// fakeClock is a settable clock for lease expiry.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func startGCS(t *testing.T, st store.Store, mutate ...func(*Config)) *Server {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Port = 0
	cfg.Store = st
	for _, m := range mutate {
		m(&cfg)
	}
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start GCS: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// redisStore is a store on a new redis-server (AOF, a free loopback port) that a GCS
// stop leaves open, so a second GCS can start on it.
func redisStore(t *testing.T, namespace string) keepOpenStore {
	t.Helper()
	redis := redisserver.Start(t)
	cfg := store.DefaultRedisConfig()
	cfg.Address, cfg.Namespace = redis.Addr, namespace
	st, err := store.NewRedis(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return keepOpenStore{st}
}

type clients struct {
	nodes pb.NodeInfoServiceClient
	kv    pb.InternalKVServiceClient
	jobs  pb.JobInfoServiceClient
	pgs   pb.PlacementGroupServiceClient
}

func dial(t *testing.T, addr string, version uint32) clients {
	t.Helper()
	conn, err := rpcutil.Dial(addr, rpcutil.DialOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return clients{pb.NewNodeInfoServiceClient(conn), pb.NewInternalKVServiceClient(conn), pb.NewJobInfoServiceClient(conn), pb.NewPlacementGroupServiceClient(conn)}
}

func TestKVIsNamespaced(t *testing.T) {
	s := startGCS(t, store.NewMemory())
	c := dial(t, s.Address(), 0)
	ctx := context.Background()
	put := func(ns, key, value string, overwrite bool) bool {
		t.Helper()
		r, err := c.kv.KVPut(ctx, &pb.KVPutRequest{Namespace: ns, Key: []byte(key), Value: []byte(value), Overwrite: overwrite})
		if err != nil {
			t.Fatal(err)
		}
		return r.Added
	}
	if !put("a", "k1", "v1", false) || put("a", "k1", "other", false) {
		t.Fatal("KVPut without overwrite: first must add, second must not")
	}
	if put("a", "k1", "v2", true) {
		t.Fatal("KVPut overwrite of an existing key reported added")
	}
	put("a", "k2", "v", true)
	put("b", "k1", "b-value", true)
	got, err := c.kv.KVGet(ctx, &pb.KVGetRequest{Namespace: "a", Key: []byte("k1")})
	if err != nil || !got.Found || string(got.Value) != "v2" {
		t.Fatalf("KVGet a/k1 = %v, %v", got, err)
	}
	keys, err := c.kv.KVKeys(ctx, &pb.KVKeysRequest{Namespace: "a", Prefix: []byte("k")})
	if err != nil || len(keys.Keys) != 2 || string(keys.Keys[0]) != "k1" || string(keys.Keys[1]) != "k2" {
		t.Fatalf("KVKeys a/k* = %q, %v", keys.GetKeys(), err)
	}
	del, err := c.kv.KVDel(ctx, &pb.KVDelRequest{Namespace: "a", Key: []byte("k"), DelByPrefix: true})
	if err != nil || del.DeletedNum != 2 {
		t.Fatalf("KVDel a/k* = %v, %v", del, err)
	}
	exists, err := c.kv.KVExists(ctx, &pb.KVExistsRequest{Namespace: "b", Key: []byte("k1")})
	if err != nil || !exists.Exists {
		t.Fatalf("namespace b lost its key when a's were deleted: %v %v", exists, err)
	}
	_, err = c.kv.KVPut(ctx, &pb.KVPutRequest{Namespace: "a", Value: []byte("v")})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "key") {
		t.Fatalf("KVPut without a key: %v, want InvalidArgument naming key", err)
	}
}

// A finished job's Python functions (namespace "fun", Ray's RemoteFunction:<job>:<sha>)
// and objects (namespace "obj", Object:<job>:<id>:<chunk>) are deleted with it; another
// job's stay.
func TestFinishedJobsFunctionsLeaveTheKV(t *testing.T) {
	s := startGCS(t, store.NewMemory())
	c := dial(t, s.Address(), 0)
	ctx := context.Background()
	var jobs []string
	for pid := int64(1); pid <= 2; pid++ {
		reply, err := c.jobs.AddJob(ctx, &pb.AddJobRequest{Namespace: "ns", DriverPid: pid})
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, reply.Job.JobId)
		for _, sha := range []string{"aa", "bb"} {
			key := []byte("RemoteFunction:" + reply.Job.JobId + ":" + sha)
			if _, err := c.kv.KVPut(ctx, &pb.KVPutRequest{Namespace: "fun", Key: key, Value: []byte("pickled")}); err != nil {
				t.Fatal(err)
			}
			object := []byte("Object:" + reply.Job.JobId + ":" + sha + ":0")
			if _, err := c.kv.KVPut(ctx, &pb.KVPutRequest{Namespace: "obj", Key: object, Value: []byte("chunk")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := c.jobs.MarkJobFinished(ctx, &pb.MarkJobFinishedRequest{JobId: jobs[0]}); err != nil {
		t.Fatal(err)
	}
	for i, job := range jobs {
		keys, err := c.kv.KVKeys(ctx, &pb.KVKeysRequest{Namespace: "fun", Prefix: []byte("RemoteFunction:" + job + ":")})
		if err != nil {
			t.Fatal(err)
		}
		if want := []int{0, 2}[i]; len(keys.Keys) != want {
			t.Errorf("job %s (finished: %t) has %d functions in the KV, want %d", job, i == 0, len(keys.Keys), want)
		}
		objects, err := c.kv.KVKeys(ctx, &pb.KVKeysRequest{Namespace: "obj", Prefix: []byte("Object:" + job + ":")})
		if err != nil {
			t.Fatal(err)
		}
		if want := []int{0, 2}[i]; len(objects.Keys) != want {
			t.Errorf("job %s (finished: %t) has %d object chunks in the KV, want %d", job, i == 0, len(objects.Keys), want)
		}
	}
}

// A GCS-held object is at most maxObjectBytes: its chunk past that is refused naming
// the limit, and a key not shaped as a chunk's is refused.
func TestObjectsInTheKVAreBounded(t *testing.T) {
	s := startGCS(t, store.NewMemory())
	c := dial(t, s.Address(), 0)
	ctx := context.Background()
	put := func(key string) error {
		_, err := c.kv.KVPut(ctx, &pb.KVPutRequest{Namespace: "obj", Key: []byte(key), Value: []byte("chunk")})
		return err
	}
	last := maxObjectBytes/maxKVValueBytes - 1
	if err := put(fmt.Sprintf("Object:01000000:ab:%d", last)); err != nil {
		t.Errorf("the last chunk within 100 MiB: %v", err)
	}
	if err := put(fmt.Sprintf("Object:01000000:ab:%d", last+1)); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "at most 104857600 bytes (100 MiB)") {
		t.Errorf("a chunk past 100 MiB: %v, want InvalidArgument naming the limit", err)
	}
	for _, key := range []string{"Object:01000000:ab", "Other:01000000:ab:0", "Object:01000000:ab:-1"} {
		if err := put(key); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "chunk index") {
			t.Errorf("key %q: %v, want InvalidArgument", key, err)
		}
	}
}

type keptClasses map[string]bool

func (k keptClasses) classKeysInUse(string) map[string]bool { return k }

// A finished job's sweep keeps the classes its live detached actors use; the actor
// manager deletes each when its last actor dies.
func TestFinishedJobKeepsItsDetachedActorsClasses(t *testing.T) {
	ctx := context.Background()
	kept := "RemoteFunction:job1:aa"
	kv := &kvService{store: store.NewMemory(), holders: keptClasses{kept: true}}
	for _, key := range []string{kept, "RemoteFunction:job1:bb"} {
		if _, err := kv.KVPut(ctx, &pb.KVPutRequest{Namespace: "fun", Key: []byte(key), Value: []byte("pickled")}); err != nil {
			t.Fatal(err)
		}
	}
	left := func() []string {
		reply, err := kv.KVKeys(ctx, &pb.KVKeysRequest{Namespace: "fun", Prefix: []byte("RemoteFunction:job1:")})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, key := range reply.Keys {
			keys = append(keys, string(key))
		}
		return keys
	}
	kv.onJobDead(&pb.JobInfo{JobId: "job1"})
	if got := left(); len(got) != 1 || got[0] != kept {
		t.Fatalf("after the job's sweep: %v, want only the detached actor's class %s", got, kept)
	}
	kv.deleteFunctions(kept)
	if got := left(); len(got) != 0 {
		t.Fatalf("after its last actor died: %v, want none", got)
	}
}

func TestProtocolVersionMismatchNamesBothVersions(t *testing.T) {
	s := startGCS(t, store.NewMemory())
	c := dial(t, s.Address(), rpcutil.ProtocolVersion+1)
	_, err := c.nodes.GetClusterInfo(context.Background(), &pb.GetClusterInfoRequest{})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("mismatched client: %v, want FailedPrecondition", err)
	}
	for _, want := range []string{"protocol version mismatch", "2", "1", s.Address()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestEpochGrowsWithEveryStartOnTheSameStore(t *testing.T) {
	redis := redisserver.Start(t)
	open := func() store.Store {
		cfg := store.DefaultRedisConfig()
		cfg.Address, cfg.Namespace = redis.Addr, "epoch-test"
		st, err := store.NewRedis(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	first := startGCS(t, open())
	epoch1 := first.Epoch()
	first.Stop()
	second := startGCS(t, open())
	if second.Epoch() != epoch1+1 {
		t.Fatalf("second start epoch %d, want %d", second.Epoch(), epoch1+1)
	}
	// A fresh memory store starts from the clock, so it is newer than any earlier start.
	mem := startGCS(t, store.NewMemory())
	if mem.Epoch() < time.Now().Add(-time.Minute).UnixMilli() {
		t.Fatalf("memory-store epoch %d does not start from the start time", mem.Epoch())
	}
}

func TestJobLeaseExpiresWithoutRenewal(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	s := startGCS(t, store.NewMemory(), func(c *Config) { c.Now = clock.Now; c.JobLeaseTimeout = 100 * time.Millisecond })
	c := dial(t, s.Address(), 0)
	ctx := context.Background()
	renewed, err := c.jobs.AddJob(ctx, &pb.AddJobRequest{Namespace: "ns", DriverPid: 1})
	if err != nil {
		t.Fatal(err)
	}
	silent, err := c.jobs.AddJob(ctx, &pb.AddJobRequest{DriverPid: 2})
	if err != nil {
		t.Fatal(err)
	}
	if first, second := jobNumber(t, renewed.Job.JobId), jobNumber(t, silent.Job.JobId); second != first+1 || first < 1<<24 {
		t.Errorf("job ids %s, %s: want consecutive numbers from a random base of a fresh store", renewed.Job.JobId, silent.Job.JobId)
	}
	clock.Advance(80 * time.Millisecond)
	if _, err := c.jobs.RenewJobLease(ctx, &pb.RenewJobLeaseRequest{JobId: renewed.Job.JobId}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(80 * time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for {
		all, err := c.jobs.GetAllJobInfo(ctx, &pb.GetAllJobInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		dead := map[string]bool{}
		for _, j := range all.Jobs {
			dead[j.JobId] = j.IsDead
		}
		if dead[silent.Job.JobId] {
			if dead[renewed.Job.JobId] {
				t.Fatal("the renewed job died with the silent one")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a job that stopped renewing is still alive")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := c.jobs.RenewJobLease(ctx, &pb.RenewJobLeaseRequest{JobId: silent.Job.JobId}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("renewing a dead job: %v, want FailedPrecondition", err)
	}
}

// A node id is registered again, reports and unregisters only with the secret its first
// registration returned, also after a GCS restart on the same store: nobody else can take
// over a live node's id (and receive its bundles) or take it out.
func TestANodeIDIsHeldByTheSecretOfItsFirstRegistration(t *testing.T) {
	st := redisStore(t, "node-secret-test")
	long := func(c *Config) { c.ReconnectGrace = time.Hour }
	first := startGCS(t, st, long)
	c := dial(t, first.Address(), 0)
	ctx := context.Background()
	node := &pb.NodeInfo{NodeId: "aa", RayletAddress: "127.0.0.1:1", ResourcesTotal: map[string]float64{"CPU": 1}}
	reply, err := c.nodes.RegisterNode(ctx, &pb.RegisterNodeRequest{Node: node})
	if err != nil || len(reply.NodeSecret) != 64 {
		t.Fatalf("first registration: %v, secret %q", err, reply.GetNodeSecret())
	}
	secret := reply.NodeSecret
	check := func(c clients, label string) {
		t.Helper()
		hijack := proto.Clone(node).(*pb.NodeInfo)
		hijack.RayletAddress = "127.0.0.1:2"
		for _, presented := range []string{"", "forged"} {
			if _, err := c.nodes.RegisterNode(ctx, &pb.RegisterNodeRequest{Node: hijack, NodeSecret: presented}); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "node_secret") {
				t.Fatalf("%s: re-registration with secret %q: %v, want PermissionDenied naming node_secret", label, presented, err)
			}
			if _, err := c.nodes.ReportHeartbeat(ctx, &pb.ReportHeartbeatRequest{NodeId: "aa", NodeSecret: presented}); status.Code(err) != codes.PermissionDenied {
				t.Fatalf("%s: heartbeat with secret %q: %v, want PermissionDenied", label, presented, err)
			}
			if _, err := c.nodes.UnregisterNode(ctx, &pb.UnregisterNodeRequest{NodeId: "aa", NodeSecret: presented}); status.Code(err) != codes.PermissionDenied {
				t.Fatalf("%s: unregistration with secret %q: %v, want PermissionDenied", label, presented, err)
			}
		}
		all, err := c.nodes.GetAllNodeInfo(ctx, &pb.GetAllNodeInfoRequest{})
		if err != nil || len(all.Nodes) != 1 || all.Nodes[0].RayletAddress != "127.0.0.1:1" {
			t.Fatalf("%s: the node table after the forged calls: %v %v", label, all.GetNodes(), err)
		}
		if _, err := c.nodes.ReportHeartbeat(ctx, &pb.ReportHeartbeatRequest{NodeId: "aa", NodeSecret: secret}); err != nil {
			t.Fatalf("%s: the node's own heartbeat: %v", label, err)
		}
	}
	check(c, "first GCS")
	first.Stop()
	second := startGCS(t, st, long)
	c = dial(t, second.Address(), 0)
	check(c, "restarted GCS")
	if again, err := c.nodes.RegisterNode(ctx, &pb.RegisterNodeRequest{Node: node, NodeSecret: secret}); err != nil || again.NodeSecret != "" {
		t.Fatalf("the node's own re-registration: %v (secret %q, want none issued)", err, again.GetNodeSecret())
	}
}

// A node that registers and then never reports is DEAD after NodeTimeout.
func TestANodeThatNeverReportsIsDeadAfterTheNodeTimeout(t *testing.T) {
	s := startGCS(t, store.NewMemory(), func(c *Config) { c.NodeTimeout = 300 * time.Millisecond })
	c := dial(t, s.Address(), 0)
	ctx := context.Background()
	node := &pb.NodeInfo{NodeId: "silent", RayletAddress: "127.0.0.1:1", ResourcesTotal: map[string]float64{"CPU": 1}}
	if _, err := c.nodes.RegisterNode(ctx, &pb.RegisterNodeRequest{Node: node}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the silent node DEAD", func() error {
		all, err := c.nodes.GetAllNodeInfo(ctx, &pb.GetAllNodeInfoRequest{})
		if err != nil {
			return err
		}
		if n := all.Nodes[0]; n.State != pb.NodeState_DEAD || !strings.Contains(n.DeathReason, "no heartbeat") {
			return fmt.Errorf("%v %q", n.State, n.DeathReason)
		}
		return nil
	})
}

func TestRegisterValidatesAndDeadNodesCannotReturn(t *testing.T) {
	s := startGCS(t, store.NewMemory())
	c := dial(t, s.Address(), 0)
	ctx := context.Background()
	_, err := c.nodes.RegisterNode(ctx, &pb.RegisterNodeRequest{Node: &pb.NodeInfo{RayletAddress: "127.0.0.1:1"}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "node_id") {
		t.Fatalf("register without node_id: %v", err)
	}
	node := &pb.NodeInfo{NodeId: "aa", RayletAddress: "127.0.0.1:1", ResourcesTotal: map[string]float64{"CPU": 1}}
	registered, err := c.nodes.RegisterNode(ctx, &pb.RegisterNodeRequest{Node: node})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.nodes.UnregisterNode(ctx, &pb.UnregisterNodeRequest{NodeId: "aa", NodeSecret: registered.NodeSecret}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.nodes.ReportHeartbeat(ctx, &pb.ReportHeartbeatRequest{NodeId: "aa"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("heartbeat of a DEAD node: %v, want FailedPrecondition", err)
	}
	if _, err := c.nodes.RegisterNode(ctx, &pb.RegisterNodeRequest{Node: node}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("re-registering a DEAD node id: %v, want FailedPrecondition", err)
	}
	if _, err := c.nodes.ReportHeartbeat(ctx, &pb.ReportHeartbeatRequest{NodeId: "bb"}); status.Code(err) != codes.NotFound {
		t.Fatalf("heartbeat of an unknown node: %v, want NotFound", err)
	}
	if _, err := c.nodes.DrainNode(ctx, &pb.DrainNodeRequest{NodeId: "zz"}); status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "node_id") {
		t.Fatalf("drain of an unknown node: %v", err)
	}
}

func TestConfigValidateNamesTheField(t *testing.T) {
	cases := map[string]func(*Config){
		"NodeIP":                func(c *Config) { c.NodeIP = "localhost:1" },
		"Port":                  func(c *Config) { c.Port = 70000 },
		"Store":                 func(c *Config) { c.Store = nil },
		"ReconnectGrace":        func(c *Config) { c.ReconnectGrace = 0 },
		"JobLeaseTimeout":       func(c *Config) { c.JobLeaseTimeout = -time.Second },
		"MaxExecutableBytes":    func(c *Config) { c.MaxExecutableBytes = 0 },
		"ExecutableGracePeriod": func(c *Config) { c.ExecutableGracePeriod = -time.Minute },
		"DeadActorRetention":    func(c *Config) { c.DeadActorRetention = 0 },
		"MaxDeadActors":         func(c *Config) { c.MaxDeadActors = -1 },
	}
	for field, mutate := range cases {
		cfg := DefaultConfig()
		cfg.Store = store.NewMemory()
		mutate(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("Validate with a bad %s: %v", field, err)
		}
	}
	cfg := DefaultConfig()
	cfg.Store = store.NewMemory()
	cfg.ExecutableGracePeriod = 0
	if err := cfg.Validate(); err == nil || err.Error() != "gcs config: ExecutableGracePeriod 0s must be positive" {
		t.Errorf("Validate with no grace period: %v", err)
	}
}

// A node offering NaN, negative or overflowing amounts is refused at registration (it
// would stop every placement), naming the resource; so is such a heartbeat.
func TestRegisterRefusesBadResources(t *testing.T) {
	s := startGCS(t, store.NewMemory())
	c := dial(t, s.Address(), 0)
	ctx := context.Background()
	for name, offer := range map[string]map[string]float64{
		`node.resources_total["CPU"]`:  {"CPU": math.NaN()},
		`node.resources_total["GPU"]`:  {"GPU": -1},
		`node.resources_total["TPU"]`:  {"TPU": 1e30},
		`node.resources_total["GPU"]:`: {"GPU": 0.5},
	} {
		node := &pb.NodeInfo{NodeId: "bad", RayletAddress: "127.0.0.1:1", ResourcesTotal: offer}
		_, err := c.nodes.RegisterNode(ctx, &pb.RegisterNodeRequest{Node: node})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), name) {
			t.Errorf("register offering %v: %v, want InvalidArgument naming %s", offer, err, name)
		}
	}
	reply, err := c.nodes.GetAllNodeInfo(ctx, &pb.GetAllNodeInfoRequest{})
	if err != nil || len(reply.Nodes) != 0 {
		t.Fatalf("nodes after refused registrations: %v, %v", reply.GetNodes(), err)
	}
	good := &pb.NodeInfo{NodeId: "good", RayletAddress: "127.0.0.1:1", ResourcesTotal: map[string]float64{"CPU": 1}}
	if _, err := c.nodes.RegisterNode(ctx, &pb.RegisterNodeRequest{Node: good}); err != nil {
		t.Fatal(err)
	}
	_, err = c.nodes.ReportHeartbeat(ctx, &pb.ReportHeartbeatRequest{NodeId: "good", ResourcesAvailable: map[string]float64{"CPU": math.Inf(1)}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `resources_available["CPU"]`) {
		t.Fatalf("heartbeat with an infinite amount: %v", err)
	}
}

// Names, namespaces and keys are bounded at 1 KiB and refuse NUL; a KV value at 1 MiB (a
// 200 MB group name was accepted, and a 5 MB one broke every client listing the groups).
func TestNamesAndValuesAreBounded(t *testing.T) {
	s := startGCS(t, store.NewMemory())
	c := dial(t, s.Address(), 0)
	ctx := context.Background()
	long := strings.Repeat("n", maxNameBytes+1)
	bundles := []*pb.CreatePlacementGroupRequest_BundleSpec{{Resources: map[string]float64{"CPU": 1}}}
	for field, req := range map[string]*pb.CreatePlacementGroupRequest{
		"name: must be at most 1024 bytes, got 1025":      {Strategy: "PACK", Lifetime: lifetimeDetached, Bundles: bundles, Name: long},
		"namespace: must be at most 1024 bytes, got 1025": {Strategy: "PACK", Lifetime: lifetimeDetached, Bundles: bundles, Name: "a", Namespace: long},
		"name: must not contain a NUL byte":               {Strategy: "PACK", Lifetime: lifetimeDetached, Bundles: bundles, Name: "a\x00b"},
	} {
		if _, err := c.pgs.CreatePlacementGroup(ctx, req); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), field) {
			t.Errorf("create: %v, want InvalidArgument %q", err, field)
		}
	}
	if _, err := c.pgs.CreatePlacementGroup(ctx, &pb.CreatePlacementGroupRequest{Strategy: "PACK", Lifetime: lifetimeDetached, Bundles: bundles, Name: strings.Repeat("n", maxNameBytes)}); err != nil {
		t.Errorf("a name of exactly 1 KiB: %v", err)
	}
	if _, err := c.jobs.AddJob(ctx, &pb.AddJobRequest{Namespace: long}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "namespace") {
		t.Errorf("job namespace of 1025 bytes: %v", err)
	}
	if _, err := c.kv.KVPut(ctx, &pb.KVPutRequest{Key: []byte(long), Value: []byte("v")}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "key") {
		t.Errorf("KV key of 1025 bytes: %v", err)
	}
	if _, err := c.kv.KVPut(ctx, &pb.KVPutRequest{Key: []byte("k"), Value: make([]byte, maxKVValueBytes+1)}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "value") {
		t.Errorf("KV value of 1 MiB + 1: %v", err)
	}
	if _, err := c.kv.KVPut(ctx, &pb.KVPutRequest{Key: []byte("k"), Value: make([]byte, maxKVValueBytes)}); err != nil {
		t.Errorf("KV value of exactly 1 MiB: %v", err)
	}
}

// The Python client bounds names as the GCS does: both read the shared rules file.
func TestNameLimitMatchesTheSharedRules(t *testing.T) {
	raw, err := os.ReadFile("../internal/resources/testdata/bundle_rules.json")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		MaxNameBytes int `json:"max_name_bytes_gcs"`
	}
	if err := json.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	if rules.MaxNameBytes != maxNameBytes {
		t.Errorf("bundle_rules.json says names are at most %d bytes, the GCS %d", rules.MaxNameBytes, maxNameBytes)
	}
}

// jobNumber decodes Ray's job id: 4 bytes, little-endian, in hex.
func jobNumber(t *testing.T, id string) int64 {
	t.Helper()
	b, err := hex.DecodeString(id)
	if err != nil || len(b) != 4 {
		t.Fatalf("job id %q: not 4 bytes of hex", id)
	}
	return int64(binary.LittleEndian.Uint32(b))
}

// A GCS on a fresh memory store (every restart of one) never reuses an earlier
// incarnation's job ids: an old driver's shutdown cannot finish a new driver's job.
func TestJobIDsAreNotReusedAcrossMemoryStoreRestarts(t *testing.T) {
	seen := map[string]bool{}
	for range 3 {
		cfg := DefaultConfig()
		cfg.Port, cfg.Store = 0, store.NewMemory()
		s, err := Start(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		reply, err := s.jobs.AddJob(context.Background(), &pb.AddJobRequest{DriverPid: 1})
		s.Stop()
		if err != nil {
			t.Fatal(err)
		}
		if seen[reply.Job.JobId] {
			t.Fatalf("job id %s given by two incarnations", reply.Job.JobId)
		}
		seen[reply.Job.JobId] = true
	}
}

// After a restart, a reloaded node whose raylet address refuses connections is DEAD a
// tenth of the grace later, not at its end: a GCS restarted again and again within the
// grace would otherwise keep it ALIVE, a target every placement on which fails. A node
// whose address still accepts connections (a raylet cut off or stopped) keeps the grace.
func TestAReloadedNodeWhoseRayletIsGoneIsDeadBeforeTheGraceEnds(t *testing.T) {
	st := redisStore(t, "reloaded-gone-test")
	first := startGCS(t, st, func(c *Config) { c.ReconnectGrace = time.Hour })
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	goneAddress := closed.Addr().String()
	closed.Close()
	open, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	c := dial(t, first.Address(), 0)
	ctx := context.Background()
	for id, address := range map[string]string{"gone": goneAddress, "cut": open.Addr().String()} {
		node := &pb.NodeInfo{NodeId: id, RayletAddress: address, ResourcesTotal: map[string]float64{"CPU": 1}}
		if _, err := c.nodes.RegisterNode(ctx, &pb.RegisterNodeRequest{Node: node}); err != nil {
			t.Fatal(err)
		}
	}
	first.Stop()
	second := startGCS(t, st, func(c *Config) { c.ReconnectGrace = 20 * time.Second })
	c = dial(t, second.Address(), 0)
	states := func() map[string]*pb.NodeInfo {
		all, err := c.nodes.GetAllNodeInfo(ctx, &pb.GetAllNodeInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*pb.NodeInfo{}
		for _, n := range all.Nodes {
			out[n.NodeId] = n
		}
		return out
	}
	poll.Until(t, 10*time.Second, 50*time.Millisecond, "the node whose raylet is gone is DEAD", func() error {
		if n := states()["gone"]; n.GetState() != pb.NodeState_DEAD || n.GetDeathReason() != deathRayletGone {
			return fmt.Errorf("it is %v (%q)", n.GetState(), n.GetDeathReason())
		}
		return nil
	})
	if n := states()["cut"]; n.GetState() != pb.NodeState_ALIVE {
		t.Fatalf("the node whose address accepts connections is %v (%q), want ALIVE until the grace ends", n.GetState(), n.GetDeathReason())
	}
}
