package stateapi

import (
	"encoding/json"
	"math"
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
