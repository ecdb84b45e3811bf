package raylet

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/internal/proc"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/raylet/gpu"
	"github.com/raygo-dev/raygo/raylet/gpu/gpusim"
)

// simulatedGPUs is a simulated dgx-h100's eight GPUs as a raylet's config lists them.
func simulatedGPUs(t *testing.T) []*pb.GPUInfo {
	t.Helper()
	lib, _, err := gpusim.Simulate("dgx-h100", gpusim.SimOptions{Seed: "workers", SysfsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	devices, err := gpu.Discover(lib)
	if err != nil {
		t.Fatal(err)
	}
	gpus := make([]*pb.GPUInfo, len(devices))
	for i, d := range devices {
		gpus[i] = &pb.GPUInfo{Index: int32(d.Index), Uuid: d.UUID, Model: d.Model, MemoryBytes: d.MemoryBytes, NvlinkIsland: -1, Rail: -1}
	}
	return gpus
}

func withGPUs(t *testing.T) func(*Config) {
	return func(cfg *Config) { cfg.GPUs = simulatedGPUs(t) }
}

// wantCode checks the gRPC code a client sees for err (nodeManagerStatus keeps a status
// a handler returned; it maps the plain errors of the ledger, pool and cache).
func wantCode(t *testing.T, err error, code codes.Code, contains ...string) {
	t.Helper()
	if status.Code(nodeManagerStatus(err)) != code {
		t.Fatalf("error %v: want %s", err, code)
	}
	for _, s := range contains {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not name %q", err, s)
		}
	}
}

func TestLeaseReturnAndReuseIdleWorker(t *testing.T) {
	h := startWorkerHarness(t, nil)
	first := h.mustLease(t, &pb.RequestWorkerLeaseRequest{Resources: map[string]float64{"CPU": 1}})
	if !first.Leased || first.Address == "" || first.Pid == 0 || first.BundleIndex != -1 || first.NodeId != h.raylet.NodeID() {
		t.Fatalf("leased worker %v", first)
	}
	env := askEnv(t, first)
	if env.pid != first.Pid {
		t.Fatalf("the worker runs as pid %d, WorkerInfo says %d", env.pid, first.Pid)
	}
	want := map[string]string{
		"CUDA_VISIBLE_DEVICES": "", "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "RAYGO_RESOURCES": `{"CPU":1}`,
		"RAYGO_PLACEMENT_GROUP_ID": unsetMarker, "RAYGO_BUNDLE_INDEX": unsetMarker,
		"RAYGO_JOB_ID": "job-1", "RAYGO_WORKER_ID": first.WorkerId, "RAYGO_NODE_ID": h.raylet.NodeID(),
	}
	for name, value := range want {
		if env.vars[name] != value {
			t.Errorf("%s=%q, want %q", name, env.vars[name], value)
		}
	}
	if got := h.available("CPU"); got != 3 {
		t.Fatalf("CPU available %v while leased, want 3", got)
	}

	reply, err := h.client.ReturnWorker(context.Background(), &pb.ReturnWorkerRequest{WorkerId: first.WorkerId})
	if err != nil {
		t.Fatal(err)
	}
	if got := reply.Resources.ResourcesAvailable["CPU"]; got != 4 {
		t.Fatalf("CPU available %v after the return, want 4", got)
	}
	if workers := h.workers(t); len(workers) != 1 || workers[0].Leased || workers[0].Resources != nil {
		t.Fatalf("workers after the return %v: want one idle", workers)
	}
	again := h.mustLease(t, &pb.RequestWorkerLeaseRequest{Resources: map[string]float64{"CPU": 1}})
	if again.WorkerId != first.WorkerId || again.Pid != first.Pid {
		t.Fatalf("second lease got worker %s pid %d, want the idle %s pid %d", again.WorkerId, again.Pid, first.WorkerId, first.Pid)
	}
	// A worker's environment describes its lease (RAYGO_RESOURCES): another shape gets
	// another worker.
	bigger := h.mustLease(t, &pb.RequestWorkerLeaseRequest{Resources: map[string]float64{"CPU": 2}})
	if bigger.Pid == first.Pid {
		t.Fatal("a 2-CPU lease got the worker started with RAYGO_RESOURCES={CPU: 1}")
	}
	other := h.mustLease(t, &pb.RequestWorkerLeaseRequest{JobId: "job-2", Resources: map[string]float64{"CPU": 1}})
	if other.Pid == first.Pid {
		t.Fatal("another job got the first job's worker")
	}
	if _, err := h.client.ReturnWorker(context.Background(), &pb.ReturnWorkerRequest{WorkerId: "unknown"}); err != nil {
		t.Fatalf("returning an unknown worker: %v, want a no-op", err)
	}
	// The log files exist where the config put them.
	if !isRegularFile(h.logDir + "/worker-" + first.WorkerId + ".err") {
		t.Error("no worker-<id>.err in WorkerLogDir")
	}
}

func TestLeaseRequestValidation(t *testing.T) {
	h := startWorkerHarness(t, nil)
	ctx := context.Background()
	type leaseCase struct {
		req      *pb.RequestWorkerLeaseRequest
		code     codes.Code
		contains string
	}
	cases := []leaseCase{
		{&pb.RequestWorkerLeaseRequest{ExecutableSha256: h.sha}, codes.InvalidArgument, "job_id"},
		{&pb.RequestWorkerLeaseRequest{JobId: "j", ExecutableSha256: "abc"}, codes.InvalidArgument, "executable_sha256"},
		{&pb.RequestWorkerLeaseRequest{JobId: "j", ExecutableSha256: h.sha, Resources: map[string]float64{"CPU": -1}}, codes.InvalidArgument, `resources["CPU"]`},
		{&pb.RequestWorkerLeaseRequest{JobId: "j", ExecutableSha256: h.sha, Resources: map[string]float64{"GPU": 1.5}}, codes.InvalidArgument, `resources["GPU"]`},
		{&pb.RequestWorkerLeaseRequest{JobId: "j", ExecutableSha256: h.sha, Resources: map[string]float64{"CPU": 5}}, codes.InvalidArgument, "resources: the request asks"},
		{&pb.RequestWorkerLeaseRequest{JobId: "j", ExecutableSha256: h.sha, PlacementGroupId: "pg", BundleIndex: -2}, codes.InvalidArgument, "bundle_index"},
		// A Python job's worker: its interpreter, and no executable.
		{&pb.RequestWorkerLeaseRequest{JobId: "j", PythonWorker: &pb.PythonWorker{Interpreter: "python3"}}, codes.InvalidArgument, "python_worker.interpreter"},
		{&pb.RequestWorkerLeaseRequest{JobId: "j", PythonWorker: &pb.PythonWorker{Interpreter: "/bin/sh", WorkingDir: "tmp"}}, codes.InvalidArgument, "python_worker.working_dir"},
		{&pb.RequestWorkerLeaseRequest{JobId: "j", ExecutableSha256: h.sha, PythonWorker: &pb.PythonWorker{Interpreter: "/bin/sh"}}, codes.InvalidArgument, "executable_sha256"},
		{&pb.RequestWorkerLeaseRequest{JobId: "j", PythonWorker: &pb.PythonWorker{Interpreter: "/nonexistent/python"}, Resources: map[string]float64{"CPU": 1}}, codes.InvalidArgument, "not an interpreter on node"},
		{&pb.RequestWorkerLeaseRequest{JobId: "j", PythonWorker: &pb.PythonWorker{Interpreter: "/bin/sh", WorkingDir: "/nonexistent/dir"}, Resources: map[string]float64{"CPU": 1}}, codes.InvalidArgument, "not a directory on node"},
	}
	if h.uploaded { // a GCS with ExecutableService says which executables it lacks
		cases = append(cases, leaseCase{&pb.RequestWorkerLeaseRequest{JobId: "j", ExecutableSha256: strings.Repeat("0", 64)}, codes.NotFound, "executable_sha256"})
	}
	for _, c := range cases {
		_, err := h.client.RequestWorkerLease(ctx, c.req)
		wantCode(t, err, c.code, c.contains)
	}
	if got := h.available("CPU"); got != 4 {
		t.Fatalf("refused requests changed the resources: CPU available %v", got)
	}
	if _, err := h.client.DrainRaylet(ctx, &pb.DrainRayletRequest{Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	_, err := h.lease(t, &pb.RequestWorkerLeaseRequest{Resources: map[string]float64{"CPU": 1}})
	wantCode(t, err, codes.FailedPrecondition, "draining")
}

// Node-level GPU leases take distinct GPUs, and the GCS sees them in the heartbeats.
func TestNodeLevelGPULeases(t *testing.T) {
	h := startWorkerHarness(t, withGPUs(t))
	a := h.mustLease(t, &pb.RequestWorkerLeaseRequest{Resources: map[string]float64{"GPU": 1}})
	b := h.mustLease(t, &pb.RequestWorkerLeaseRequest{Resources: map[string]float64{"GPU": 2}})
	half := h.mustLease(t, &pb.RequestWorkerLeaseRequest{Resources: map[string]float64{"GPU": 0.5}})
	if got := [3]string{a.CudaVisibleDevices, b.CudaVisibleDevices, half.CudaVisibleDevices}; got != [3]string{"0", "1,2", "3"} {
		t.Fatalf("CUDA_VISIBLE_DEVICES %q: want the lowest free GPUs 0 / 1,2 / 3", got)
	}
	if env := askEnv(t, b); env.vars["CUDA_VISIBLE_DEVICES"] != "1,2" || env.vars["CUDA_DEVICE_ORDER"] != "PCI_BUS_ID" || env.vars["RAYGO_RESOURCES"] != `{"GPU":2}` {
		t.Fatalf("worker env %v", env.vars)
	}
	// A second half GPU shares GPU 3 (best fit) instead of breaking into a whole GPU.
	other := h.mustLease(t, &pb.RequestWorkerLeaseRequest{Resources: map[string]float64{"GPU": 0.5}})
	if other.CudaVisibleDevices != "3" || other.WorkerId == half.WorkerId {
		t.Fatalf("second half GPU: worker %s on %q, want a new worker on GPU 3", other.WorkerId, other.CudaVisibleDevices)
	}
	if got := h.available("GPU"); got != 4 {
		t.Fatalf("GPU available %v, want 4", got)
	}
	gcsAvailableGPU := func() float64 {
		conn, err := rpcutil.Dial(h.gcs.Address(), rpcutil.DialOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		reply, err := pb.NewNodeInfoServiceClient(conn).GetAllNodeInfo(context.Background(), &pb.GetAllNodeInfoRequest{AliveOnly: true})
		if err != nil || len(reply.Nodes) != 1 {
			t.Fatalf("GetAllNodeInfo: %v %v", reply, err)
		}
		return reply.Nodes[0].ResourcesAvailable["GPU"]
	}
	eventually(t, "the GCS sees 4 GPUs available", func() bool { return gcsAvailableGPU() == 4 })

	_, err := h.lease(t, &pb.RequestWorkerLeaseRequest{Resources: map[string]float64{"GPU": 5}})
	wantCode(t, err, codes.ResourceExhausted, "GPU")
	_, err = h.lease(t, &pb.RequestWorkerLeaseRequest{Resources: map[string]float64{"GPU": 9}})
	wantCode(t, err, codes.InvalidArgument, "resources")
	// A bundle prepared now cannot take a leased GPU.
	_, err = h.client.PrepareBundleResources(context.Background(), &pb.PrepareBundleResourcesRequest{Bundles: []*pb.BundleReservation{
		{Key: key("pg", 0, 1), Resources: map[string]float64{"GPU": 1}, GpuIds: []int32{0}},
	}})
	wantCode(t, err, codes.FailedPrecondition, "GPU 0 is not free")

	for _, w := range []*pb.WorkerInfo{a, b, half, other} {
		if _, err := h.client.ReturnWorker(context.Background(), &pb.ReturnWorkerRequest{WorkerId: w.WorkerId}); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.available("GPU"); got != 8 {
		t.Fatalf("GPU available %v after the returns, want 8", got)
	}
	eventually(t, "the GCS sees 8 GPUs available", func() bool { return gcsAvailableGPU() == 8 })
	// The idle worker on GPU 0 serves the next lease that lands on GPU 0.
	if again := h.mustLease(t, &pb.RequestWorkerLeaseRequest{Resources: map[string]float64{"GPU": 1}}); again.WorkerId != a.WorkerId {
		t.Fatalf("lease on GPU 0 got worker %s, want the idle %s", again.WorkerId, a.WorkerId)
	}
}

// prepareAndCommit reserves bundles as the GCS does: prepare, then commit.
func (h *workerHarness) prepareAndCommit(t *testing.T, bundles ...*pb.BundleReservation) {
	t.Helper()
	ctx := context.Background()
	if _, err := h.client.PrepareBundleResources(ctx, &pb.PrepareBundleResourcesRequest{Bundles: bundles}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.CommitBundleResources(ctx, &pb.CommitBundleResourcesRequest{Bundles: keysOf(bundles)}); err != nil {
		t.Fatal(err)
	}
}

func TestBundleLeases(t *testing.T) {
	h := startWorkerHarness(t, withGPUs(t))
	ctx := context.Background()
	h.prepareAndCommit(t, &pb.BundleReservation{Key: key("pg1", 0, 1), Resources: map[string]float64{"CPU": 1, "GPU": 1}, GpuIds: []int32{3}})
	if _, err := h.client.PrepareBundleResources(ctx, &pb.PrepareBundleResourcesRequest{Bundles: []*pb.BundleReservation{
		{Key: key("pg2", 0, 1), Resources: map[string]float64{"CPU": 1}},
	}}); err != nil {
		t.Fatal(err)
	}
	before := h.raylet.Node().ResourcesAvailable

	w := h.mustLease(t, &pb.RequestWorkerLeaseRequest{PlacementGroupId: "pg1", BundleIndex: 0, Resources: map[string]float64{"CPU": 1, "GPU": 1}})
	if w.PlacementGroupId != "pg1" || w.BundleIndex != 0 || len(w.GpuIds) != 1 || w.GpuIds[0] != 3 || w.CudaVisibleDevices != "3" {
		t.Fatalf("bundle lease %v: want GPU 3 of bundle pg1[0]", w)
	}
	env := askEnv(t, w)
	if env.vars["CUDA_VISIBLE_DEVICES"] != "3" || env.vars["RAYGO_PLACEMENT_GROUP_ID"] != "pg1" || env.vars["RAYGO_BUNDLE_INDEX"] != "0" {
		t.Fatalf("worker env %v", env.vars)
	}
	if after := h.raylet.Node().ResourcesAvailable; after["CPU"] != before["CPU"] || after["GPU"] != before["GPU"] {
		t.Fatalf("a bundle lease took from the node: available %v → %v", before, after)
	}

	_, err := h.lease(t, &pb.RequestWorkerLeaseRequest{PlacementGroupId: "pg1", BundleIndex: 0, Resources: map[string]float64{"GPU": 2}})
	wantCode(t, err, codes.InvalidArgument, "bundle_index", "bundle 0 of placement group pg1")
	_, err = h.lease(t, &pb.RequestWorkerLeaseRequest{PlacementGroupId: "pg1", BundleIndex: -1, Resources: map[string]float64{"GPU": 2}})
	wantCode(t, err, codes.InvalidArgument, "no bundle of placement group pg1")
	_, err = h.lease(t, &pb.RequestWorkerLeaseRequest{PlacementGroupId: "pg1", BundleIndex: 0, Resources: map[string]float64{"CPU": 0.5}})
	wantCode(t, err, codes.ResourceExhausted, "pg1")
	_, err = h.lease(t, &pb.RequestWorkerLeaseRequest{PlacementGroupId: "pg1", BundleIndex: 1, Resources: map[string]float64{"CPU": 1}})
	wantCode(t, err, codes.FailedPrecondition, "placement group pg1 bundle 1 is not held")
	_, err = h.lease(t, &pb.RequestWorkerLeaseRequest{PlacementGroupId: "pg2", BundleIndex: 0, Resources: map[string]float64{"CPU": 1}})
	wantCode(t, err, codes.FailedPrecondition, "placement group pg2 bundle 0 is prepared but not committed")
	_, err = h.lease(t, &pb.RequestWorkerLeaseRequest{PlacementGroupId: "pg3", BundleIndex: -1, Resources: map[string]float64{"CPU": 1}})
	wantCode(t, err, codes.FailedPrecondition, "placement group pg3 has no committed bundle")

	// Cancelling the bundle kills the worker leased from it.
	if _, err := h.client.CancelResourceReserve(ctx, &pb.CancelResourceReserveRequest{Bundles: []*pb.BundleKey{key("pg1", 0, 1)}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the bundle's worker is gone", func() bool { return len(h.workers(t)) == 0 && !proc.Alive(int(w.Pid)) })
}

// A lease with bundle_index -1 takes the first bundle of the group with room.
func TestBundleLeaseAnyBundle(t *testing.T) {
	h := startWorkerHarness(t, withGPUs(t))
	h.prepareAndCommit(t,
		&pb.BundleReservation{Key: key("pg", 0, 1), Resources: map[string]float64{"GPU": 1}},
		&pb.BundleReservation{Key: key("pg", 1, 1), Resources: map[string]float64{"GPU": 1}},
	)
	first := h.mustLease(t, &pb.RequestWorkerLeaseRequest{PlacementGroupId: "pg", BundleIndex: -1, Resources: map[string]float64{"GPU": 1}})
	second := h.mustLease(t, &pb.RequestWorkerLeaseRequest{PlacementGroupId: "pg", BundleIndex: -1, Resources: map[string]float64{"GPU": 1}})
	if first.BundleIndex != 0 || second.BundleIndex != 1 || first.CudaVisibleDevices == second.CudaVisibleDevices {
		t.Fatalf("leases %v and %v: want bundles 0 and 1 on distinct GPUs", first, second)
	}
	_, err := h.lease(t, &pb.RequestWorkerLeaseRequest{PlacementGroupId: "pg", BundleIndex: -1, Resources: map[string]float64{"GPU": 1}})
	wantCode(t, err, codes.ResourceExhausted, "no bundle on node")
}

func TestQueuedLeaseWaitsForReturn(t *testing.T) {
	h := startWorkerHarness(t, func(cfg *Config) { cfg.Resources = map[string]float64{"CPU": 1} })
	holder := h.mustLease(t, &pb.RequestWorkerLeaseRequest{Resources: map[string]float64{"CPU": 1}})
	_, err := h.lease(t, &pb.RequestWorkerLeaseRequest{Resources: map[string]float64{"CPU": 1}})
	wantCode(t, err, codes.ResourceExhausted, "CPU")

	// Queued with a short deadline: it waits, then gives up when the deadline passes.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err = h.client.RequestWorkerLease(ctx, &pb.RequestWorkerLeaseRequest{JobId: "job-1", ExecutableSha256: h.sha, Resources: map[string]float64{"CPU": 1}, Queue: true})
	cancel()
	wantCode(t, err, codes.DeadlineExceeded)

	type result struct {
		reply *pb.RequestWorkerLeaseReply
		err   error
	}
	done := make(chan result, 1)
	go func() {
		reply, err := h.client.RequestWorkerLease(context.Background(), &pb.RequestWorkerLeaseRequest{
			JobId: "job-1", ExecutableSha256: h.sha, Resources: map[string]float64{"CPU": 1}, Queue: true,
		})
		done <- result{reply, err}
	}()
	select {
	case got := <-done:
		t.Fatalf("a queued lease returned while the node was full: %v %v", got.reply, got.err)
	default:
	}
	if _, err := h.client.ReturnWorker(context.Background(), &pb.ReturnWorkerRequest{WorkerId: holder.WorkerId}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-done:
		if got.err != nil {
			t.Fatalf("queued lease after the return: %v", got.err)
		}
		if got.reply.Worker.WorkerId != holder.WorkerId {
			t.Fatalf("queued lease got worker %s, want the returned idle %s", got.reply.Worker.WorkerId, holder.WorkerId)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the queued lease did not proceed after the return")
	}
}

func TestDeadWorkerReleasesItsLease(t *testing.T) {
	h := startWorkerHarness(t, nil)
	w := h.mustLease(t, &pb.RequestWorkerLeaseRequest{Resources: map[string]float64{"CPU": 3}})
	if err := syscall.Kill(int(w.Pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the dead worker's CPUs are free", func() bool { return h.available("CPU") == 4 })
	eventually(t, "the dead worker left the pool", func() bool { return len(h.workers(t)) == 0 })

	// KillWorker releases at once, in its reply.
	w = h.mustLease(t, &pb.RequestWorkerLeaseRequest{Resources: map[string]float64{"CPU": 3}})
	reply, err := h.client.KillWorker(context.Background(), &pb.KillWorkerRequest{WorkerId: w.WorkerId, Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if got := reply.Resources.ResourcesAvailable["CPU"]; got != 4 {
		t.Fatalf("CPU available %v in KillWorker's reply, want 4", got)
	}
	eventually(t, "the killed worker's process is gone", func() bool { return !proc.Alive(int(w.Pid)) })
	if _, err := h.client.KillWorker(context.Background(), &pb.KillWorkerRequest{WorkerId: w.WorkerId}); err != nil {
		t.Fatalf("killing a dead worker: %v, want a no-op", err)
	}
}

func TestKillJobWorkersSparesDetachedActors(t *testing.T) {
	h := startWorkerHarness(t, nil)
	task := h.mustLease(t, &pb.RequestWorkerLeaseRequest{})
	actor := h.mustLease(t, &pb.RequestWorkerLeaseRequest{ActorId: "actor-1"})
	detached := h.mustLease(t, &pb.RequestWorkerLeaseRequest{ActorId: "actor-2", Detached: true})
	otherJob := h.mustLease(t, &pb.RequestWorkerLeaseRequest{JobId: "job-2"})
	idle := h.mustLease(t, &pb.RequestWorkerLeaseRequest{})
	if _, err := h.client.ReturnWorker(context.Background(), &pb.ReturnWorkerRequest{WorkerId: idle.WorkerId}); err != nil {
		t.Fatal(err)
	}
	reply, err := h.client.KillJobWorkers(context.Background(), &pb.KillJobWorkersRequest{JobId: "job-1"})
	if err != nil {
		t.Fatal(err)
	}
	if reply.Killed != 3 {
		t.Fatalf("killed %d workers, want 3 (task, actor, idle)", reply.Killed)
	}
	eventually(t, "only the detached actor's and job-2's workers remain", func() bool {
		workers := h.workers(t)
		return len(workers) == 2 && !proc.Alive(int(task.Pid)) && !proc.Alive(int(actor.Pid)) && !proc.Alive(int(idle.Pid))
	})
	for _, w := range h.workers(t) {
		if w.WorkerId != detached.WorkerId && w.WorkerId != otherJob.WorkerId {
			t.Fatalf("worker %v survived", w)
		}
		if w.WorkerId == detached.WorkerId && w.ActorId != "actor-2" {
			t.Fatalf("detached actor's worker %v", w)
		}
	}
	// An actor's worker is never reused: returning it kills it.
	if _, err := h.client.ReturnWorker(context.Background(), &pb.ReturnWorkerRequest{WorkerId: detached.WorkerId}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the returned actor worker is gone", func() bool { return !proc.Alive(int(detached.Pid)) })
}

func TestIdleWorkersAreReaped(t *testing.T) {
	h := startWorkerHarness(t, func(cfg *Config) { cfg.IdleWorkerTimeout = 100 * time.Millisecond })
	w := h.mustLease(t, &pb.RequestWorkerLeaseRequest{})
	if _, err := h.client.ReturnWorker(context.Background(), &pb.ReturnWorkerRequest{WorkerId: w.WorkerId}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the idle worker is killed", func() bool { return len(h.workers(t)) == 0 && !proc.Alive(int(w.Pid)) })
}

func TestWorkerThatExitsBeforeRegisteringFailsTheLease(t *testing.T) {
	h := startWorkerHarness(t, nil)
	t.Setenv(testWorkerModeEnv, "exit")
	_, err := h.lease(t, &pb.RequestWorkerLeaseRequest{Resources: map[string]float64{"CPU": 1}})
	wantCode(t, err, codes.Internal, "exited before registering: exit status 3", "exiting on purpose")
	if got := h.available("CPU"); got != 4 {
		t.Fatalf("CPU available %v after a failed start, want 4", got)
	}
}

func TestWorkerThatNeverRegistersTimesOut(t *testing.T) {
	h := startWorkerHarness(t, func(cfg *Config) { cfg.WorkerStartTimeout = 300 * time.Millisecond })
	t.Setenv(testWorkerModeEnv, "hang")
	_, err := h.lease(t, &pb.RequestWorkerLeaseRequest{Resources: map[string]float64{"CPU": 1}})
	wantCode(t, err, codes.Unavailable, "did not call RegisterWorker within 300ms")
	if got := h.available("CPU"); got != 4 {
		t.Fatalf("CPU available %v after a start timeout, want 4", got)
	}
	eventually(t, "the hung worker is gone", func() bool { return len(h.raylet.workerPIDs()) == 0 })
}

func TestStopKillsWorkers(t *testing.T) {
	h := startWorkerHarness(t, nil)
	w := h.mustLease(t, &pb.RequestWorkerLeaseRequest{})
	h.raylet.Stop()
	if proc.Alive(int(w.Pid)) {
		t.Fatalf("worker pid %d alive after Stop", w.Pid)
	}
}

// workerPIDs lists the pids of the pool's workers, starting ones included.
func (r *Raylet) workerPIDs() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var pids []int
	for _, w := range r.workers {
		if w.process != nil {
			pids = append(pids, w.process.Pid)
		}
	}
	return pids
}

// recordingActors stands in for the GCS's ActorInfoService and records worker failures.
type recordingActors struct {
	pb.ActorInfoServiceClient
	failures chan *pb.ReportWorkerFailureRequest
}

func (a *recordingActors) ReportWorkerFailure(ctx context.Context, req *pb.ReportWorkerFailureRequest, _ ...grpc.CallOption) (*pb.ReportWorkerFailureReply, error) {
	a.failures <- req
	return &pb.ReportWorkerFailureReply{}, nil
}

func TestLeasedWorkerExitsAreReported(t *testing.T) {
	h := startWorkerHarness(t, nil)
	actors := &recordingActors{failures: make(chan *pb.ReportWorkerFailureRequest, 8)}
	h.raylet.actors = actors
	next := func() *pb.ReportWorkerFailureRequest {
		t.Helper()
		select {
		case req := <-actors.failures:
			return req
		case <-time.After(20 * time.Second):
			t.Fatal("no worker failure reported")
			return nil
		}
	}

	crashed := h.mustLease(t, &pb.RequestWorkerLeaseRequest{ActorId: "actor-1"})
	if err := syscall.Kill(int(crashed.Pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	got := next()
	if got.WorkerId != crashed.WorkerId || got.ActorId != "actor-1" || got.NodeId != h.raylet.NodeID() || got.ExitDetail != "signal: killed" || got.Intentional {
		t.Fatalf("reported %v: want actor-1's worker, signal: killed, not intentional", got)
	}

	killed := h.mustLease(t, &pb.RequestWorkerLeaseRequest{ActorId: "actor-2"})
	if _, err := h.client.KillWorker(context.Background(), &pb.KillWorkerRequest{WorkerId: killed.WorkerId, Reason: "actor killed"}); err != nil {
		t.Fatal(err)
	}
	if got := next(); got.WorkerId != killed.WorkerId || got.ExitDetail != "killed: actor killed" || !got.Intentional {
		t.Fatalf("reported %v: want killed: actor killed, intentional", got)
	}

	// Idle and returned workers end without a report.
	idle := h.mustLease(t, &pb.RequestWorkerLeaseRequest{})
	if _, err := h.client.ReturnWorker(context.Background(), &pb.ReturnWorkerRequest{WorkerId: idle.WorkerId, Disconnect: true}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the disconnected worker is gone", func() bool { return !proc.Alive(int(idle.Pid)) && len(h.workers(t)) == 0 })
	select {
	case req := <-actors.failures:
		t.Fatalf("a returned worker's exit was reported: %v", req)
	default:
	}
}

// flakyActors answers ReportWorkerFailure with errs in turn, then with errs' last one.
type flakyActors struct {
	pb.ActorInfoServiceClient
	errs  []error
	calls chan *pb.ReportWorkerFailureRequest
}

func (a *flakyActors) ReportWorkerFailure(ctx context.Context, req *pb.ReportWorkerFailureRequest, _ ...grpc.CallOption) (*pb.ReportWorkerFailureReply, error) {
	n := len(a.calls)
	a.calls <- req
	if err := a.errs[min(n, len(a.errs)-1)]; err != nil {
		return nil, err
	}
	return &pb.ReportWorkerFailureReply{}, nil
}

// A worker failure report is retried while the GCS is unreachable, until it answers
// (an error that is no unreachability counts) or the raylet stops.
func TestWorkerFailureReportRetriesUntilTheGCSAnswers(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "connection refused")
	report := &pb.ReportWorkerFailureRequest{NodeId: "n", WorkerId: "w", ActorId: "a"}
	cases := []struct {
		name  string
		errs  []error
		calls int
	}{
		{"answered after two unreachable attempts", []error{unavailable, status.Error(codes.DeadlineExceeded, "timeout"), nil}, 3},
		{"a refusal is an answer", []error{unavailable, status.Error(codes.NotFound, "no such actor")}, 2},
		{"answered at once", []error{nil}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			actors := &flakyActors{errs: c.errs, calls: make(chan *pb.ReportWorkerFailureRequest, 16)}
			r := &Raylet{log: zerolog.Nop(), stop: make(chan struct{}), actors: actors}
			r.reportWorkerFailure(report)
			if got := len(actors.calls); got != c.calls {
				t.Fatalf("%d attempts, want %d", got, c.calls)
			}
			for range c.calls {
				if req := <-actors.calls; req != report {
					t.Fatalf("reported %v, want %v", req, report)
				}
			}
		})
	}

	// A GCS that stays unreachable: the retries end when the raylet stops.
	actors := &flakyActors{errs: []error{unavailable}, calls: make(chan *pb.ReportWorkerFailureRequest, 64)}
	r := &Raylet{log: zerolog.Nop(), stop: make(chan struct{}), actors: actors}
	done := make(chan struct{})
	go func() {
		r.reportWorkerFailure(report)
		close(done)
	}()
	eventually(t, "the report was retried", func() bool { return len(actors.calls) >= 2 })
	close(r.stop)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the report kept retrying after Stop")
	}
}

// A lease granted after the caller gave up goes back to the pool: the reply is lost.
func TestLeaseGrantedAfterTheCallerGaveUpIsReturned(t *testing.T) {
	h := startWorkerHarness(t, nil)
	idle := h.mustLease(t, &pb.RequestWorkerLeaseRequest{Resources: map[string]float64{"CPU": 1}})
	if _, err := h.client.ReturnWorker(context.Background(), &pb.ReturnWorkerRequest{WorkerId: idle.WorkerId}); err != nil {
		t.Fatal(err)
	}
	// Called directly with a context that already ended: the idle worker is granted,
	// then given back.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	service := &nodeManagerService{raylet: h.raylet}
	_, err := service.RequestWorkerLease(ctx, &pb.RequestWorkerLeaseRequest{JobId: "job-1", ExecutableSha256: h.sha, Resources: map[string]float64{"CPU": 1}})
	wantCode(t, err, codes.Canceled)
	if workers := h.workers(t); len(workers) != 1 || workers[0].WorkerId != idle.WorkerId || workers[0].Leased {
		t.Fatalf("workers %v: want the idle worker back in the pool", workers)
	}
	if got := h.available("CPU"); got != 4 {
		t.Fatalf("CPU available %v, want 4", got)
	}
	// An actor's worker is never reused: a lost actor lease kills its worker.
	_, err = service.RequestWorkerLease(ctx, &pb.RequestWorkerLeaseRequest{JobId: "job-1", ExecutableSha256: h.sha, Resources: map[string]float64{"CPU": 1}, ActorId: "actor-1"})
	wantCode(t, err, codes.Canceled)
	eventually(t, "the lost actor lease's worker is gone", func() bool { return len(h.workers(t)) == 0 && !proc.Alive(int(idle.Pid)) })
	if got := h.available("CPU"); got != 4 {
		t.Fatalf("CPU available %v, want 4", got)
	}
}

// A second lease for an actor (the GCS retried after losing the first reply) replaces
// the actor's earlier worker here.
func TestNewerActorLeaseReplacesTheEarlierWorker(t *testing.T) {
	h := startWorkerHarness(t, nil)
	first := h.mustLease(t, &pb.RequestWorkerLeaseRequest{ActorId: "actor-1", Resources: map[string]float64{"CPU": 1}})
	other := h.mustLease(t, &pb.RequestWorkerLeaseRequest{ActorId: "actor-2", Resources: map[string]float64{"CPU": 1}})
	second := h.mustLease(t, &pb.RequestWorkerLeaseRequest{ActorId: "actor-1", Resources: map[string]float64{"CPU": 1}})
	if second.WorkerId == first.WorkerId {
		t.Fatal("the second lease got the first worker")
	}
	eventually(t, "the first worker is gone", func() bool { return !proc.Alive(int(first.Pid)) })
	workers := h.workers(t)
	if len(workers) != 2 {
		t.Fatalf("workers %v: want actor-1's second worker and actor-2's", workers)
	}
	for _, w := range workers {
		if w.WorkerId != second.WorkerId && w.WorkerId != other.WorkerId {
			t.Fatalf("worker %v survived", w)
		}
	}
	if got := h.available("CPU"); got != 2 {
		t.Fatalf("CPU available %v, want 2 (the first worker's CPU freed)", got)
	}
}

// An idle worker started for a bundle dies with the bundle: its environment names the
// bundle and its GPUs.
func TestIdleBundleWorkerDiesWithItsBundle(t *testing.T) {
	h := startWorkerHarness(t, withGPUs(t))
	h.prepareAndCommit(t, &pb.BundleReservation{Key: key("pg", 0, 1), Resources: map[string]float64{"CPU": 1, "GPU": 1}})
	w := h.mustLease(t, &pb.RequestWorkerLeaseRequest{PlacementGroupId: "pg", BundleIndex: 0, Resources: map[string]float64{"GPU": 1}})
	task := h.mustLease(t, &pb.RequestWorkerLeaseRequest{Resources: map[string]float64{"CPU": 1}})
	for _, returned := range []*pb.WorkerInfo{w, task} {
		if _, err := h.client.ReturnWorker(context.Background(), &pb.ReturnWorkerRequest{WorkerId: returned.WorkerId}); err != nil {
			t.Fatal(err)
		}
	}
	if workers := h.workers(t); len(workers) != 2 || workers[0].Leased || workers[1].Leased {
		t.Fatalf("workers %v: want two idle", workers)
	}
	if _, err := h.client.CancelResourceReserve(context.Background(), &pb.CancelResourceReserveRequest{Bundles: []*pb.BundleKey{key("pg", 0, 1)}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the bundle's idle worker is gone", func() bool { return !proc.Alive(int(w.Pid)) })
	if workers := h.workers(t); len(workers) != 1 || workers[0].WorkerId != task.WorkerId {
		t.Fatalf("workers %v: want only the node's idle worker", workers)
	}
}

// A lease in flight when the raylet stops starts no worker.
func TestNoWorkerStartsAfterStop(t *testing.T) {
	h := startWorkerHarness(t, nil)
	w := h.mustLease(t, &pb.RequestWorkerLeaseRequest{Resources: map[string]float64{"CPU": 1}}) // caches the executable
	req := &pb.RequestWorkerLeaseRequest{JobId: "job-1", ExecutableSha256: h.sha, Resources: map[string]float64{"CPU": 2}}
	request, err := validateLeaseRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := h.raylet.reserveLease(context.Background(), req, request) // reserved before Stop
	if err != nil {
		t.Fatal(err)
	}
	h.raylet.Stop()
	if proc.Alive(int(w.Pid)) {
		t.Fatalf("worker pid %d alive after Stop", w.Pid)
	}
	_, err = h.raylet.leaseWorker(context.Background(), req, lease)
	wantCode(t, err, codes.Unavailable, "raylet stopping")
	if pids := h.raylet.workerPIDs(); len(pids) != 0 {
		t.Fatalf("workers %v started after Stop", pids)
	}
	if got := h.available("CPU"); got != 4 {
		t.Fatalf("CPU available %v, want 4 (the refused lease released)", got)
	}
	// A new request is refused where the lease is reserved.
	_, err = (&nodeManagerService{raylet: h.raylet}).RequestWorkerLease(context.Background(), req)
	wantCode(t, err, codes.Unavailable, "raylet stopping")
}

func TestPrepareWithCommitHoldsTheBundlesCommittedInOneCall(t *testing.T) {
	h := startWorkerHarness(t, nil)
	ctx := context.Background()
	if _, err := h.client.PrepareBundleResources(ctx, &pb.PrepareBundleResourcesRequest{Commit: true, Bundles: []*pb.BundleReservation{
		{Key: key("one", 0, 1), Resources: map[string]float64{"CPU": 1}},
	}}); err != nil {
		t.Fatal(err)
	}
	// Committed: work may lease from it at once.
	h.mustLease(t, &pb.RequestWorkerLeaseRequest{PlacementGroupId: "one", BundleIndex: 0, Resources: map[string]float64{"CPU": 1}})
	// All or nothing: a call whose bundles do not all fit holds none of them.
	_, err := h.client.PrepareBundleResources(ctx, &pb.PrepareBundleResourcesRequest{Commit: true, Bundles: []*pb.BundleReservation{
		{Key: key("two", 0, 1), Resources: map[string]float64{"CPU": 1}},
		{Key: key("two", 1, 1), Resources: map[string]float64{"CPU": 1000}},
	}})
	wantCode(t, err, codes.FailedPrecondition, "insufficient resources")
	_, err = h.lease(t, &pb.RequestWorkerLeaseRequest{PlacementGroupId: "two", BundleIndex: 0, Resources: map[string]float64{"CPU": 1}})
	wantCode(t, err, codes.FailedPrecondition, "placement group two bundle 0 is not held")
}

// A leased worker blocked on its children (NotifyWorkerBlocked) lends its CPU: a lease
// queued for the node's one CPU is granted; unblocked, the worker takes the CPU back.
func TestBlockedWorkerLendsItsCPUToAQueuedLease(t *testing.T) {
	h := startWorkerHarness(t, func(cfg *Config) { cfg.Resources = map[string]float64{"CPU": 1} })
	parent := h.mustLease(t, &pb.RequestWorkerLeaseRequest{Resources: map[string]float64{"CPU": 1}})
	done := make(chan error, 1)
	go func() {
		_, err := h.client.RequestWorkerLease(context.Background(), &pb.RequestWorkerLeaseRequest{
			JobId: "job-1", ExecutableSha256: h.sha, Resources: map[string]float64{"CPU": 1}, Queue: true,
		})
		done <- err
	}()
	block := func(workerID string, blocked bool) error {
		_, err := h.client.NotifyWorkerBlocked(context.Background(), &pb.NotifyWorkerBlockedRequest{WorkerId: workerID, Blocked: blocked})
		return err
	}
	if err := block(parent.WorkerId, true); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the lease queued behind a blocked worker: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the queued lease was not granted while the holder was blocked")
	}
	if err := block(parent.WorkerId, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "nothing free while oversubscribed", func() bool { return h.available("CPU") == 0 })
	wantCode(t, block("no-such-worker", true), codes.NotFound, "no-such-worker")
}
