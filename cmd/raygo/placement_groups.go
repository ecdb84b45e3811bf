package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	pendingreason "github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/stateapi"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// preemptionText is the last notice in a line: "InClusterQueue by pg_1a2b3c4d, releasing
// at 15:04:05" while it runs, "InClusterQueue by pg_1a2b3c4d" once released.
func preemptionText(n *pb.PreemptionNotice) string {
	text := fmt.Sprintf("%s by pg_%s", n.Reason, shortID(n.PreemptorId))
	if !n.Acknowledged {
		text += ", releasing at " + time.UnixMilli(n.DeadlineMs).Format(time.TimeOnly)
	}
	return text
}

var placementGroupsListing = listing[stateapi.PlacementGroup]{
	name:        "list placement-groups",
	description: "List the cluster's placement groups, REMOVED ones included for a while.\nJSON fields follow Ray's state API.",
	examples:    "  raygo list placement-groups\n  raygo list placement-groups --format json\n",
	fetch: func(ctx context.Context, c *gcsClient) ([]stateapi.PlacementGroup, error) {
		reply, err := c.pgs.GetAllPlacementGroup(ctx, &pb.GetAllPlacementGroupRequest{})
		if err != nil {
			return nil, err
		}
		states := make([]stateapi.PlacementGroup, len(reply.PlacementGroups))
		for i, g := range reply.PlacementGroups {
			states[i] = stateapi.FromPlacementGroup(g)
		}
		return states, nil
	},
	header: "PLACEMENT_GROUP_ID\tNAME\tSTATE\tSTRATEGY\tBUNDLES\tNODES\tGPUS\tSCHEDULING_STATE\tPREEMPTED",
	row: func(s stateapi.PlacementGroup) string {
		nodes := map[string]bool{}
		var gpus []string
		for _, b := range s.Bundles {
			if b.NodeID != nil {
				nodes[*b.NodeID] = true
				if b.CUDAVisibleDevices != "" {
					gpus = append(gpus, fmt.Sprintf("%d:%s@%s", b.BundleIndex, b.CUDAVisibleDevices, shortID(*b.NodeID)))
				}
			}
		}
		gpuText := strings.Join(gpus, " ")
		if gpuText == "" {
			gpuText = "-"
		}
		preempted := "-"
		if n := s.LastPreemption; n != nil {
			preempted = fmt.Sprintf("%dx %s", s.Preemptions, preemptionText(&pb.PreemptionNotice{Reason: n.Reason, PreemptorId: n.PreemptorID,
				DeadlineMs: n.DeadlineMs, Acknowledged: n.Acknowledged}))
		}
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s", s.PlacementGroupID, s.Name, s.State, s.Strategy, len(s.Bundles), len(nodes), gpuText,
			s.Stats.SchedulingState, preempted)
	},
}

// printPlacementGroupStatus adds the placement-group section to `raygo status`: counts
// by state, and every pending group with its reason.
func printPlacementGroupStatus(w io.Writer, groups []*pb.PlacementGroupInfo) {
	fmt.Fprintf(w, "\nPlacement groups\n%s\n", strings.Repeat("-", 64))
	counts := map[string]int{}
	var pending, preempting []*pb.PlacementGroupInfo
	for _, g := range groups {
		counts[g.State.String()]++
		if n := g.LastPreemption; n != nil && !n.Acknowledged && g.State != pb.PlacementGroupState_REMOVED {
			preempting = append(preempting, g)
		}
		if g.State == pb.PlacementGroupState_PENDING || g.State == pb.PlacementGroupState_RESCHEDULING {
			pending = append(pending, g)
		}
	}
	var parts []string
	for _, state := range []string{"CREATED", "PENDING", "RESCHEDULING", "PREPARED", "REMOVED"} {
		if counts[state] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[state], state))
		}
	}
	if len(parts) == 0 {
		fmt.Fprintln(w, " (none)")
		return
	}
	fmt.Fprintf(w, " %s\n", strings.Join(parts, ", "))
	if len(preempting) > 0 {
		fmt.Fprintln(w, "Being preempted:")
		for _, g := range preempting {
			fmt.Fprintf(w, " pg_%s (%d bundles): %s\n", shortID(g.PlacementGroupId), len(g.Bundles), preemptionText(g.LastPreemption))
		}
	}
	if len(pending) == 0 {
		return
	}
	sort.SliceStable(pending, func(i, j int) bool {
		return pending[i].Stats.GetSchedulingState() == pb.SchedulingState_INFEASIBLE && pending[j].Stats.GetSchedulingState() != pb.SchedulingState_INFEASIBLE
	})
	fmt.Fprintln(w, "Pending:")
	for _, g := range pending {
		name := g.Name
		if name != "" {
			name = " " + name
		}
		reason := g.PendingReason
		if reason == "" {
			reason = "waiting for its first scheduling attempt"
		} else if code := g.PendingReasonCode; code != "" && code != string(pendingreason.Infeasible) && code != string(pendingreason.NoResources) {
			// Infeasible and NoResources are what the scheduling state already says.
			reason = "[" + code + "] " + reason
		}
		fmt.Fprintf(w, " pg_%s%s (%s, %d bundles) %s: %s\n", shortID(g.PlacementGroupId), name, g.Strategy, len(g.Bundles),
			stateapi.SchedulingStateName(g.Stats.GetSchedulingState()), reason)
	}
}
