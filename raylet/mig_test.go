package raylet

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/internal/resources"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/raylet/gpu"
	"github.com/raygo-dev/raygo/raylet/gpu/gpusim"
)

// H100 profile ids (placement/mig.go).
const (
	profile1g10gb = 19
	profile2g20gb = 14
)

// simulatedMIGNode returns a simulated dgx-h100, its GPUs and a MIG manager on it
// (closed at cleanup).
func simulatedMIGNode(t *testing.T) (nvml.Interface, []*pb.GPUInfo, *gpu.MIGManager) {
	t.Helper()
	lib, _, err := gpusim.Simulate("dgx-h100", gpusim.SimOptions{Seed: "n1", SysfsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	devices, err := gpu.Discover(lib)
	if err != nil {
		t.Fatal(err)
	}
	manager, err := gpu.NewMIGManager(lib)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = manager.Close() })
	gpus := make([]*pb.GPUInfo, len(devices))
	for i, d := range devices {
		gpus[i] = &pb.GPUInfo{Index: int32(d.Index), Uuid: d.UUID, Model: d.Model, MemoryBytes: d.MemoryBytes, NvlinkIsland: -1, Rail: -1}
	}
	return lib, gpus, manager
}

// startMIGRaylet starts a GCS and a raylet on a simulated dgx-h100 with GPU 0 in MIG mode.
func startMIGRaylet(t *testing.T, idleTimeout time.Duration) (*Raylet, nvml.Interface) {
	t.Helper()
	lib, gpus, manager := simulatedMIGNode(t)

	g := startTestGCS(t)
	cfg := DefaultConfig()
	cfg.GCSAddress = g.Address()
	cfg.HeartbeatInterval = 50 * time.Millisecond
	cfg.GPUs = gpus
	cfg.MIG, cfg.MIGGPUs, cfg.MIGIdleTimeout = manager, []int{0}, idleTimeout
	r, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r, lib
}

func migBundle(pg string, index int32, profileID, start int32, reuse bool, destroy ...int32) *pb.BundleReservation {
	name := "nvidia.com/mig-1g.10gb"
	if profileID == profile2g20gb {
		name = "nvidia.com/mig-2g.20gb"
	}
	return &pb.BundleReservation{
		Key: key(pg, index, 1), Resources: map[string]float64{"CPU": 0.1, name: 1},
		Mig: &pb.MIGStep{Gpu: 0, ProfileId: profileID, Start: start, ReuseIdle: reuse, DestroyStarts: destroy},
	}
}

// simInstances is GPU 0's GPU instances in the simulated driver, start → MIG device UUID.
func simInstances(t *testing.T, lib nvml.Interface) map[int]string {
	t.Helper()
	state, ok := gpusim.SimulatedMIGState(lib)
	if !ok || len(state) == 0 {
		t.Fatal("no simulated MIG state")
	}
	out := map[int]string{}
	for _, gi := range state[0].GPUInstances {
		uuid := ""
		if len(gi.ComputeInstances) > 0 {
			uuid = gi.ComputeInstances[0].DeviceUUID
		}
		out[gi.Start] = uuid
	}
	return out
}

// reported is GPU 0's instances as Node() reports them, by start.
func reported(t *testing.T, r *Raylet) map[int32]*pb.MIGInstanceInfo {
	t.Helper()
	node := r.Node()
	if len(node.MigGpus) != 1 || node.MigGpus[0].Index != 0 {
		t.Fatalf("mig_gpus %v: want GPU 0 only", node.MigGpus)
	}
	out := map[int32]*pb.MIGInstanceInfo{}
	for _, in := range node.MigGpus[0].Instances {
		out[in.Start] = in
	}
	return out
}

func TestMIGCarveReuseAndRepartition(t *testing.T) {
	r, lib := startMIGRaylet(t, time.Hour)
	svc := &nodeManagerService{raylet: r}
	ctx := context.Background()

	node := r.Node()
	if node.ResourcesTotal[resources.GPU] != 7 || len(node.Gpus) != 7 {
		t.Fatalf("GPU total %v with %d whole GPUs: want 7 on an 8-GPU node with GPU 0 in MIG mode", node.ResourcesTotal[resources.GPU], len(node.Gpus))
	}
	for _, g := range node.Gpus {
		if g.Index == 0 {
			t.Fatal("GPU 0 is in MIG mode but listed as a whole GPU")
		}
	}
	if node.MigGpus[0].Model == "" || node.MigGpus[0].Uuid == "" {
		t.Fatalf("mig_gpus[0] %v: want its model and UUID", node.MigGpus[0])
	}

	// Seven 1g.10gb bundles fill GPU 0.
	var seven []*pb.BundleReservation
	for i := int32(0); i < 7; i++ {
		seven = append(seven, migBundle("a", i, profile1g10gb, i, false))
	}
	reply, err := svc.PrepareBundleResources(ctx, &pb.PrepareBundleResourcesRequest{Bundles: seven})
	if err != nil {
		t.Fatal(err)
	}
	uuids := map[string]bool{}
	for i, b := range reply.Bundles {
		if len(b.GpuIds) != 1 || b.GpuIds[0] != 0 || len(b.DeviceUuids) != 1 || !strings.HasPrefix(b.DeviceUuids[0], "MIG-") ||
			b.Mig.GetStart() != int32(i) || b.Mig.GetProfileId() != profile1g10gb {
			t.Fatalf("bundle %d reservation %v", i, b)
		}
		uuids[b.DeviceUuids[0]] = true
	}
	if len(uuids) != 7 || len(reply.Resources.MigGpus[0].Instances) != 7 {
		t.Fatalf("%d distinct UUIDs, report %v: want 7", len(uuids), reply.Resources.MigGpus)
	}
	for start, in := range reported(t, r) {
		if !in.Held || in.DeviceUuid == "" {
			t.Errorf("instance at %d: %v, want held with a UUID", start, in)
		}
	}
	if got := simInstances(t, lib); len(got) != 7 {
		t.Fatalf("simulated NVML has %d instances, want 7", len(got))
	}
	if _, err := svc.CommitBundleResources(ctx, &pb.CommitBundleResourcesRequest{Bundles: keysOf(seven)}); err != nil {
		t.Fatal(err)
	}

	// An eighth at a taken slot fails and changes nothing, also when it comes with a
	// bundle that would fit.
	before := r.Node()
	_, err = svc.PrepareBundleResources(ctx, &pb.PrepareBundleResourcesRequest{Bundles: []*pb.BundleReservation{migBundle("b", 0, profile1g10gb, 3, false)}})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "taken") {
		t.Fatalf("8th carve at a held slot: %v, want FailedPrecondition naming the taken slots", err)
	}
	after := r.Node()
	if len(after.MigGpus[0].Instances) != 7 || len(simInstances(t, lib)) != 7 || len(r.bundles.reserved) != 7 {
		t.Fatalf("a refused prepare changed the instances: before %v after %v", before.MigGpus, after.MigGpus)
	}

	// Cancel: the instance goes idle, still carved.
	cancelled := seven[4].Key
	if _, err := svc.CancelResourceReserve(ctx, &pb.CancelResourceReserveRequest{Bundles: []*pb.BundleKey{cancelled}}); err != nil {
		t.Fatal(err)
	}
	idle := reported(t, r)[4]
	if idle == nil || idle.Held {
		t.Fatalf("instance at 4 after cancel: %v, want idle", idle)
	}
	if simInstances(t, lib)[4] != idle.DeviceUuid {
		t.Fatal("the cancelled bundle's instance was destroyed; want it idle")
	}

	// All or nothing: a bundle that would reuse the idle instance, with one that cannot
	// be placed, leaves the instance idle.
	_, err = svc.PrepareBundleResources(ctx, &pb.PrepareBundleResourcesRequest{Bundles: []*pb.BundleReservation{
		migBundle("c", 0, profile1g10gb, 4, true), migBundle("c", 1, profile1g10gb, 5, false),
	}})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("request with a bundle at a held slot: %v", err)
	}
	if in := reported(t, r)[4]; in == nil || in.Held {
		t.Fatalf("instance at 4 after a refused request: %v, want idle", in)
	}

	// reuse_idle at that start gets the same instance.
	reply, err = svc.PrepareBundleResources(ctx, &pb.PrepareBundleResourcesRequest{Bundles: []*pb.BundleReservation{migBundle("d", 0, profile1g10gb, 4, true)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := reply.Bundles[0].DeviceUuids[0]; got != idle.DeviceUuid {
		t.Fatalf("reuse got %s, want the idle instance %s", got, idle.DeviceUuid)
	}

	// Destroying idle instances makes room for another geometry: 2g.20gb at 4.
	_, err = svc.CancelResourceReserve(ctx, &pb.CancelResourceReserveRequest{Bundles: []*pb.BundleKey{key("d", 0, 1), seven[5].Key}})
	if err != nil {
		t.Fatal(err)
	}
	reply, err = svc.PrepareBundleResources(ctx, &pb.PrepareBundleResourcesRequest{Bundles: []*pb.BundleReservation{migBundle("e", 0, profile2g20gb, 4, false, 4, 5)}})
	if err != nil {
		t.Fatal(err)
	}
	sim := simInstances(t, lib)
	if len(sim) != 6 || sim[4] != reply.Bundles[0].DeviceUuids[0] {
		t.Fatalf("simulated NVML %v: want 1g at 0-3 and 6 and the 2g.20gb at 4", sim)
	}
	if _, ok := sim[5]; ok {
		t.Fatal("the idle instance at 5 was not destroyed")
	}
}

func keysOf(bundles []*pb.BundleReservation) []*pb.BundleKey {
	keys := make([]*pb.BundleKey, len(bundles))
	for i, b := range bundles {
		keys[i] = b.Key
	}
	return keys
}

func TestMIGDestroyIdleThenCarveAnotherProfile(t *testing.T) {
	r, lib := startMIGRaylet(t, time.Hour)
	svc := &nodeManagerService{raylet: r}
	ctx := context.Background()
	bundles := []*pb.BundleReservation{migBundle("a", 0, profile1g10gb, 4, false), migBundle("a", 1, profile1g10gb, 5, false)}
	if _, err := svc.PrepareBundleResources(ctx, &pb.PrepareBundleResourcesRequest{Bundles: bundles}); err != nil {
		t.Fatal(err)
	}
	// Refused while a bundle holds an instance to destroy.
	_, err := svc.PrepareBundleResources(ctx, &pb.PrepareBundleResourcesRequest{Bundles: []*pb.BundleReservation{migBundle("b", 0, profile2g20gb, 4, false, 4, 5)}})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "holds it") {
		t.Fatalf("destroying a held instance: %v", err)
	}
	if len(simInstances(t, lib)) != 2 {
		t.Fatal("a refused prepare destroyed instances")
	}
	if _, err := svc.CancelResourceReserve(ctx, &pb.CancelResourceReserveRequest{Bundles: keysOf(bundles)}); err != nil {
		t.Fatal(err)
	}
	reply, err := svc.PrepareBundleResources(ctx, &pb.PrepareBundleResourcesRequest{Bundles: []*pb.BundleReservation{migBundle("b", 0, profile2g20gb, 4, false, 4, 5)}})
	if err != nil {
		t.Fatal(err)
	}
	got := simInstances(t, lib)
	if len(got) != 1 || got[4] != reply.Bundles[0].DeviceUuids[0] {
		t.Fatalf("simulated NVML %v: want only the 2g.20gb at 4 (%s)", got, reply.Bundles[0].DeviceUuids[0])
	}
	if in := reported(t, r)[4]; in == nil || in.ProfileId != profile2g20gb || !in.Held {
		t.Fatalf("reported instance at 4: %v", in)
	}
	if n := r.bundles.mig.repartitions(0); n != 5 { // 2 carves, 2 destroys, 1 carve
		t.Errorf("repartitions %d, want 5", n)
	}
}

func TestMIGRepartitionRateLimit(t *testing.T) {
	r, _ := startMIGRaylet(t, time.Hour)
	svc := &nodeManagerService{raylet: r}
	r.mu.Lock()
	r.bundles.mig.repartitionLimit = 2
	r.mu.Unlock()
	for i := int32(0); i < 3; i++ {
		_, err := svc.PrepareBundleResources(context.Background(), &pb.PrepareBundleResourcesRequest{Bundles: []*pb.BundleReservation{migBundle("a", i, profile1g10gb, i, false)}})
		if i < 2 && err != nil {
			t.Fatal(err)
		}
		if i == 2 && (status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "GPU 0: MIG re-partitioning rate limit")) {
			t.Fatalf("third carve in a minute with a limit of 2: %v", err)
		}
	}
}

func TestMIGIdleInstancesAreDestroyedAfterTimeout(t *testing.T) {
	r, lib := startMIGRaylet(t, 50*time.Millisecond)
	svc := &nodeManagerService{raylet: r}
	ctx := context.Background()
	bundles := []*pb.BundleReservation{migBundle("a", 0, profile1g10gb, 0, false), migBundle("a", 1, profile1g10gb, 1, false)}
	if _, err := svc.PrepareBundleResources(ctx, &pb.PrepareBundleResourcesRequest{Bundles: bundles}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CommitBundleResources(ctx, &pb.CommitBundleResourcesRequest{Bundles: keysOf(bundles)}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CancelResourceReserve(ctx, &pb.CancelResourceReserveRequest{Bundles: []*pb.BundleKey{bundles[0].Key}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(simInstances(t, lib)) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("idle instance not destroyed: %v", simInstances(t, lib))
		}
		time.Sleep(10 * time.Millisecond)
	}
	got := reported(t, r)
	if len(got) != 1 || got[1] == nil || !got[1].Held {
		t.Fatalf("reported %v: want only the held instance at 1", got)
	}
}

// A restarted raylet adopts the instances it finds as idle.
func TestMIGAdoptsExistingInstancesAsIdle(t *testing.T) {
	_, gpus, manager := simulatedMIGNode(t)
	if err := manager.SetMode(0, true); err != nil {
		t.Fatal(err)
	}
	carved, err := manager.Carve(0, profile1g10gb, 2)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.MIG, cfg.MIGGPUs, cfg.GPUs = manager, []int{0}, gpus
	table, err := newMIGTable(cfg, cfg.Logger)
	if err != nil {
		t.Fatal(err)
	}
	report := table.report()
	if len(report) != 1 || len(report[0].Instances) != 1 {
		t.Fatalf("report %v: want the one carved instance", report)
	}
	if in := report[0].Instances[0]; in.Held || in.Start != 2 || in.DeviceUuid != carved.DeviceUUID {
		t.Fatalf("adopted %v, want idle at 2 with %s", in, carved.DeviceUUID)
	}
}
