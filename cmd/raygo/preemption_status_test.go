package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/stateapi"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// A group being preempted shows its notice in `raygo status` and in `raygo list
// placement-groups` (table and JSON); once released, the row keeps the count and reason.
func TestPreemptionNoticesShowInStatusAndListings(t *testing.T) {
	deadline := time.Date(2026, 1, 2, 15, 4, 5, 0, time.Local)
	victim := &pb.PlacementGroupInfo{PlacementGroupId: "aaaaaaaa11112222333344445555666677778888", State: pb.PlacementGroupState_CREATED,
		Stats: &pb.PlacementGroupStats{}, Preemptions: 2, Bundles: []*pb.Bundle{{}},
		LastPreemption: &pb.PreemptionNotice{Reason: "InClusterQueue", PreemptorId: "bbbbbbbb11112222333344445555666677778888",
			TimeMs: deadline.Add(-30 * time.Second).UnixMilli(), DeadlineMs: deadline.UnixMilli()}}
	var out bytes.Buffer
	printPlacementGroupStatus(&out, []*pb.PlacementGroupInfo{victim})
	if !strings.Contains(out.String(), "Being preempted:") || !strings.Contains(out.String(), "InClusterQueue by pg_bbbbbbbb1111, releasing at 15:04:05") {
		t.Fatalf("status:\n%s", out.String())
	}
	row := placementGroupsListing.row(stateapi.FromPlacementGroup(victim))
	if !strings.HasSuffix(row, "\t2x InClusterQueue by pg_bbbbbbbb1111, releasing at 15:04:05") {
		t.Fatalf("row %q", row)
	}
	victim.LastPreemption.Acknowledged = true
	victim.State = pb.PlacementGroupState_PENDING
	out.Reset()
	printPlacementGroupStatus(&out, []*pb.PlacementGroupInfo{victim})
	if strings.Contains(out.String(), "Being preempted:") {
		t.Fatalf("a released group still listed as being preempted:\n%s", out.String())
	}
	data, err := json.Marshal(stateapi.FromPlacementGroup(victim))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"preemptions":2,"last_preemption":{"reason":"InClusterQueue","preemptor_id":"bbbbbbbb11112222333344445555666677778888"`) {
		t.Fatalf("json %s", data)
	}
}
