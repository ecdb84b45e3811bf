package stateapi

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// A node row holding NaN or ±Inf (refused by today's GCS, but possible in an old store)
// still lists as JSON, with null where the value cannot be written.
func TestJSONListingsNeverFailOnAValue(t *testing.T) {
	node := &pb.NodeInfo{NodeId: "n", State: pb.NodeState_DEAD,
		ResourcesTotal:     map[string]float64{"CPU": math.NaN(), "GPU": 8},
		ResourcesAvailable: map[string]float64{"CPU": math.Inf(1), "memory": math.Inf(-1)}}
	group := &pb.PlacementGroupInfo{PlacementGroupId: "g", Stats: &pb.PlacementGroupStats{SchedulingLatencyMs: math.NaN()},
		Bundles: []*pb.Bundle{{UnitResources: map[string]float64{"CPU": math.NaN()}}}}
	actor := &pb.ActorInfo{ActorId: "a", RequiredResources: map[string]float64{"GPU": math.Inf(1)}}
	out, err := json.Marshal([]any{FromNode(node), FromPlacementGroup(group), FromActor(actor)})
	if err != nil {
		t.Fatalf("JSON listing failed: %v", err)
	}
	text := string(out)
	for _, want := range []string{`"CPU":null`, `"GPU":8`, `"memory":null`, `"scheduling_latency_ms":null`} {
		if !strings.Contains(text, want) {
			t.Fatalf("%s missing from %s", want, text)
		}
	}
}

// A node row carries each GPU's and MIG instance's last measured activity beside its
// identity; what was not measured is null, not 0.
func TestNodeRowsCarryMeasuredActivity(t *testing.T) {
	node := &pb.NodeInfo{NodeId: "n", State: pb.NodeState_ALIVE,
		Gpus: []*pb.GPUInfo{{Index: 0, Uuid: "GPU-0"}, {Index: 1, Uuid: "GPU-1"}, {Index: 2, Uuid: "GPU-2"}},
		MigGpus: []*pb.MIGGPUInfo{{Index: 7, Uuid: "GPU-7", Instances: []*pb.MIGInstanceInfo{
			{ProfileId: 19, Start: 0, Held: true, DeviceUuid: "MIG-a"}, {ProfileId: 19, Start: 1, DeviceUuid: "MIG-b"}}}},
		GpuActivity: []*pb.GPUActivity{
			{GpuIndex: 0, HasSmActive: true, SmActive: 0.03, HasMemory: true, FbUsedBytes: 1 << 30},
			{GpuIndex: 1, HasMemory: true, FbUsedBytes: 0},
			{GpuIndex: 7, MigDeviceUuid: "MIG-a", HasSmActive: true, SmActive: 0.5},
		}}
	raw, err := json.Marshal(FromNode(node))
	if err != nil {
		t.Fatal(err)
	}
	var row struct {
		GPUs []struct {
			Index       int      `json:"index"`
			SMActive    *float64 `json:"sm_active"`
			FBUsedBytes *uint64  `json:"fb_used_bytes"`
		} `json:"gpus"`
		MIGGPUs []struct {
			Instances []struct {
				DeviceUUID  string   `json:"device_uuid"`
				SMActive    *float64 `json:"sm_active"`
				FBUsedBytes *uint64  `json:"fb_used_bytes"`
			} `json:"instances"`
		} `json:"mig_gpus"`
	}
	if err := json.Unmarshal(raw, &row); err != nil {
		t.Fatal(err)
	}
	show := func(f *float64, u *uint64) string {
		out := "sm null"
		if f != nil {
			out = "sm " + strings.TrimRight(strings.TrimRight(strconv.FormatFloat(*f, 'f', 2, 64), "0"), ".")
		}
		if u != nil {
			return out + " fb " + strconv.FormatUint(*u, 10)
		}
		return out + " fb null"
	}
	var got []string
	for _, g := range row.GPUs {
		got = append(got, show(g.SMActive, g.FBUsedBytes))
	}
	for _, i := range row.MIGGPUs[0].Instances {
		got = append(got, i.DeviceUUID+" "+show(i.SMActive, i.FBUsedBytes))
	}
	want := []string{"sm 0.03 fb 1073741824", "sm null fb 0", "sm null fb null", "MIG-a sm 0.5 fb null", "MIG-b sm null fb null"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("activity %q, want %q (%s)", got, want, raw)
	}
}
