package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	pendingreason "github.com/raygo-dev/raygo/internal/pending"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/sdk"
)

// bundleState is a bundle in the shape of Ray's state API.
type bundleState struct {
	BundleIndex   int32                `json:"bundle_index"`
	UnitResources map[string]jsonFloat `json:"unit_resources"`
	NodeID        *string              `json:"node_id"`
	LabelSelector map[string]string    `json:"label_selector,omitempty"`
	// Beyond Ray: where the bundle lives on the hardware.
	NodeAddress        string   `json:"node_address,omitempty"`
	GPUIDs             []int32  `json:"gpu_ids"`
	DeviceUUIDs        []string `json:"device_uuids"`
	CUDAVisibleDevices string   `json:"cuda_visible_devices"`
}

// placementGroupState is a group in the shape of Ray's state API
// (`ray list placement-groups --format json`), plus namespace and pending_reason.
type placementGroupState struct {
	PlacementGroupID string              `json:"placement_group_id"`
	Name             string              `json:"name"`
	Namespace        string              `json:"namespace"`
	CreatorJobID     string              `json:"creator_job_id"`
	State            string              `json:"state"`
	Strategy         string              `json:"strategy"`
	IsDetached       bool                `json:"is_detached"`
	Bundles          []bundleState       `json:"bundles"`
	Stats            placementGroupStats `json:"stats"`
	PendingReason    string              `json:"pending_reason,omitempty"`
	// PendingReasonCode and Rejections: why it waits, as a code of internal/pending and
	// the nodes counted per reason.
	PendingReasonCode string             `json:"pending_reason_code,omitempty"`
	Rejections        []rejectionSummary `json:"rejection_summaries,omitempty"`
	// Preemptions counts the preemption notices the group got; LastPreemption is the last.
	Preemptions    int32            `json:"preemptions,omitempty"`
	LastPreemption *preemptionState `json:"last_preemption,omitempty"`
}

// preemptionState is a group's last preemption notice.
type preemptionState struct {
	Reason       string `json:"reason"`
	PreemptorID  string `json:"preemptor_id"`
	TimeMs       int64  `json:"time_ms"`
	DeadlineMs   int64  `json:"deadline_ms"`
	Acknowledged bool   `json:"acknowledged"`
}

// preemptionText is the last notice in a line: "InClusterQueue by pg_1a2b3c4d, releasing
// at 15:04:05" while it runs, "InClusterQueue by pg_1a2b3c4d" once released.
func preemptionText(n *pb.PreemptionNotice) string {
	text := fmt.Sprintf("%s by pg_%s", n.Reason, shortID(n.PreemptorId))
	if !n.Acknowledged {
		text += ", releasing at " + time.UnixMilli(n.DeadlineMs).Format(time.TimeOnly)
	}
	return text
}

type rejectionSummary struct {
	Code           string   `json:"code"`
	Example        string   `json:"example"`
	Nodes          int32    `json:"nodes"`
	ExampleNodeIDs []string `json:"example_node_ids"`
}

type placementGroupStats struct {
	EndToEndCreationLatencyMs jsonFloat `json:"end_to_end_creation_latency_ms"`
	SchedulingLatencyMs       jsonFloat `json:"scheduling_latency_ms"`
	SchedulingAttempt         int32     `json:"scheduling_attempt"`
	HighestRetryDelayMs       jsonFloat `json:"highest_retry_delay_ms"`
	SchedulingState           string    `json:"scheduling_state"`
}

func toPlacementGroupState(g *pb.PlacementGroupInfo) placementGroupState {
	s := placementGroupState{
		PlacementGroupID: g.PlacementGroupId, Name: g.Name, Namespace: g.Namespace, CreatorJobID: g.CreatorJobId,
		State: g.State.String(), Strategy: g.Strategy.String(), IsDetached: g.IsDetached, PendingReason: g.PendingReason,
		Bundles: []bundleState{}, PendingReasonCode: g.PendingReasonCode, Preemptions: g.Preemptions,
	}
	if n := g.LastPreemption; n != nil {
		s.LastPreemption = &preemptionState{Reason: n.Reason, PreemptorID: n.PreemptorId, TimeMs: n.TimeMs, DeadlineMs: n.DeadlineMs, Acknowledged: n.Acknowledged}
	}
	for _, r := range g.RejectionSummaries {
		s.Rejections = append(s.Rejections, rejectionSummary{Code: r.Code, Example: r.Example, Nodes: r.Nodes, ExampleNodeIDs: r.ExampleNodeIds})
	}
	if st := g.Stats; st != nil {
		s.Stats = placementGroupStats{
			EndToEndCreationLatencyMs: jsonFloat(st.EndToEndCreationLatencyMs), SchedulingLatencyMs: jsonFloat(st.SchedulingLatencyMs),
			SchedulingAttempt: st.SchedulingAttempt, HighestRetryDelayMs: jsonFloat(st.HighestRetryDelayMs),
			SchedulingState: sdk.SchedulingStateName(st.SchedulingState),
		}
	}
	for _, b := range g.Bundles {
		bs := bundleState{BundleIndex: b.BundleIndex, UnitResources: jsonFloats(b.UnitResources), LabelSelector: b.LabelSelector,
			NodeAddress: b.NodeAddress, GPUIDs: b.GpuIds, DeviceUUIDs: b.DeviceUuids, CUDAVisibleDevices: b.CudaVisibleDevices}
		if bs.GPUIDs == nil {
			bs.GPUIDs = []int32{}
		}
		if bs.DeviceUUIDs == nil {
			bs.DeviceUUIDs = []string{}
		}
		if b.NodeId != "" {
			node := b.NodeId
			bs.NodeID = &node
		}
		s.Bundles = append(s.Bundles, bs)
	}
	return s
}

var placementGroupsListing = listing[placementGroupState]{
	name:        "list placement-groups",
	description: "List the cluster's placement groups, REMOVED ones included for a while.\nJSON fields follow Ray's state API.",
	examples:    "  raygo list placement-groups\n  raygo list placement-groups --format json\n",
	fetch: func(ctx context.Context, c *gcsClient) ([]placementGroupState, error) {
		reply, err := c.pgs.GetAllPlacementGroup(ctx, &pb.GetAllPlacementGroupRequest{})
		if err != nil {
			return nil, err
		}
		states := make([]placementGroupState, len(reply.PlacementGroups))
		for i, g := range reply.PlacementGroups {
			states[i] = toPlacementGroupState(g)
		}
		return states, nil
	},
	header: "PLACEMENT_GROUP_ID\tNAME\tSTATE\tSTRATEGY\tBUNDLES\tNODES\tGPUS\tSCHEDULING_STATE\tPREEMPTED",
	row: func(s placementGroupState) string {
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
			sdk.SchedulingStateName(g.Stats.GetSchedulingState()), reason)
	}
}
