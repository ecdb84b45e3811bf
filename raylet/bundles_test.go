package raylet

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/internal/resources"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

func key(pg string, index int32, generation int64) *pb.BundleKey {
	return &pb.BundleKey{PlacementGroupId: pg, BundleIndex: index, Generation: generation}
}

func res(pg string, index int32, generation int64, resources map[string]float64) *pb.BundleReservation {
	return &pb.BundleReservation{Key: key(pg, index, generation), Resources: resources}
}

func newTable(t *testing.T, total map[string]float64) *bundleTable {
	t.Helper()
	set, err := resources.SetFromFloat(total)
	if err != nil {
		t.Fatal(err)
	}
	var gpus []*pb.GPUInfo
	for i := 0; i < int(total["GPU"]); i++ {
		gpus = append(gpus, &pb.GPUInfo{Index: int32(i), Uuid: fmt.Sprintf("GPU-%d", i), NvlinkIsland: -1, Rail: -1})
	}
	return newBundleTable(set, gpus)
}

func availableCPU(t *bundleTable) float64 { return t.available()["CPU"].Float() }

func TestPrepareIsAllOrNothingAndIdempotent(t *testing.T) {
	table := newTable(t, map[string]float64{"CPU": 4})
	err := table.prepare("n", []*pb.BundleReservation{res("a", 0, 1, map[string]float64{"CPU": 3}), res("a", 1, 1, map[string]float64{"CPU": 2})}, 1, false)
	if status.Code(nodeManagerStatus(err)) != codes.FailedPrecondition || !strings.Contains(err.Error(), "insufficient resources") {
		t.Fatalf("prepare of 5 CPU on a 4-CPU node: %v", err)
	}
	if got := availableCPU(table); got != 4 {
		t.Fatalf("a refused prepare reserved something: available %v", got)
	}
	bundles := []*pb.BundleReservation{res("a", 0, 1, map[string]float64{"CPU": 2}), res("a", 1, 1, map[string]float64{"CPU": 1.5})}
	for i := 0; i < 3; i++ { // retries are harmless
		if err := table.prepare("n", bundles, 1, false); err != nil {
			t.Fatalf("prepare attempt %d: %v", i, err)
		}
	}
	if got := availableCPU(table); got != 0.5 {
		t.Fatalf("available after prepare = %v, want 0.5", got)
	}
	if err := table.commit([]*pb.BundleKey{key("a", 0, 1), key("a", 1, 1)}); err != nil {
		t.Fatal(err)
	}
	if err := table.commit([]*pb.BundleKey{key("a", 0, 1)}); err != nil {
		t.Fatalf("a retried commit failed: %v", err)
	}
	if got := availableCPU(table); got != 0.5 {
		t.Fatalf("commit changed the accounting: %v", got)
	}
	if err := table.prepare("n", []*pb.BundleReservation{res("b", 0, 1, map[string]float64{"CPU": 1})}, 1, true); err == nil || !strings.Contains(err.Error(), "draining") {
		t.Fatalf("prepare on a draining node: %v", err)
	}
}

func TestStaleGenerationsAreRefused(t *testing.T) {
	table := newTable(t, map[string]float64{"CPU": 4})
	if err := table.prepare("n", []*pb.BundleReservation{res("a", 0, 2, map[string]float64{"CPU": 1})}, 1, false); err != nil {
		t.Fatal(err)
	}
	// A delayed prepare or commit of generation 1 must not touch generation 2.
	if err := table.prepare("n", []*pb.BundleReservation{res("a", 0, 1, map[string]float64{"CPU": 1})}, 1, false); !strings.Contains(errString(err), "stale generation") {
		t.Fatalf("prepare of an older generation: %v", err)
	}
	if err := table.commit([]*pb.BundleKey{key("a", 0, 1)}); !strings.Contains(errString(err), "stale generation") {
		t.Fatalf("commit of an older generation: %v", err)
	}
	table.cancel([]*pb.BundleKey{key("a", 0, 1)})
	if got := availableCPU(table); got != 3 {
		t.Fatalf("a cancel of generation 1 released generation 2: available %v", got)
	}
	// Cancel, then a late prepare of the cancelled generation: refused.
	table.cancel([]*pb.BundleKey{key("a", 0, 2)})
	if got := availableCPU(table); got != 4 {
		t.Fatalf("cancel did not release: available %v", got)
	}
	if err := table.commit([]*pb.BundleKey{key("a", 0, 2)}); status.Code(nodeManagerStatus(err)) != codes.NotFound {
		t.Fatalf("commit after cancel: %v, want NotFound", err)
	}
	// A newer generation replaces an older reservation instead of adding to it.
	if err := table.prepare("n", []*pb.BundleReservation{res("a", 0, 3, map[string]float64{"CPU": 4})}, 1, false); err != nil {
		t.Fatal(err)
	}
	if err := table.prepare("n", []*pb.BundleReservation{res("a", 0, 4, map[string]float64{"CPU": 4})}, 1, false); err != nil {
		t.Fatalf("a newer generation of a held bundle: %v", err)
	}
	if got := availableCPU(table); got != 0 {
		t.Fatalf("available %v, want 0 (one reservation of 4)", got)
	}
}

func TestReleaseUnusedKeepsCurrentEpochAndInUse(t *testing.T) {
	table := newTable(t, map[string]float64{"CPU": 8})
	mustPrepare := func(pg string, epoch int64) {
		if err := table.prepare("n", []*pb.BundleReservation{res(pg, 0, 1, map[string]float64{"CPU": 1})}, epoch, false); err != nil {
			t.Fatal(err)
		}
	}
	mustPrepare("kept", 1)      // old GCS, still in use
	mustPrepare("orphan", 1)    // old GCS, unknown to the new one
	mustPrepare("stale-gen", 1) // old GCS, the new one knows a newer generation
	mustPrepare("new", 2)       // prepared by the current GCS
	released, held := table.releaseUnused([]*pb.BundleKey{key("kept", 0, 1), key("stale-gen", 0, 5)}, 2)
	names := func(rows []*pb.BundleReservation) string {
		var out []string
		for _, r := range rows {
			out = append(out, r.Key.PlacementGroupId)
		}
		return strings.Join(out, ",")
	}
	if got := names(released); got != "orphan,stale-gen" {
		t.Errorf("released %q, want orphan,stale-gen", got)
	}
	if got := names(held); got != "kept,new" {
		t.Errorf("held %q, want kept,new", got)
	}
	if got := availableCPU(table); got != 6 {
		t.Errorf("available %v, want 6", got)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
