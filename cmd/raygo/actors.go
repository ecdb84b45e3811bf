package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// actorState is an actor in the shape of Ray's state API (`ray list actors --format
// json`), plus the GPUs of its worker.
type actorState struct {
	ActorID           string               `json:"actor_id"`
	ClassName         string               `json:"class_name"`
	State             string               `json:"state"`
	Name              string               `json:"name"`
	RayNamespace      string               `json:"ray_namespace"`
	JobID             string               `json:"job_id"`
	NodeID            string               `json:"node_id"`
	PID               int64                `json:"pid"`
	PlacementGroupID  string               `json:"placement_group_id"`
	RequiredResources map[string]jsonFloat `json:"required_resources"`
	IsDetached        bool                 `json:"is_detached"`
	NumRestarts       int64                `json:"num_restarts"`
	MaxRestarts       int64                `json:"max_restarts"`
	DeathCause        string               `json:"death_cause,omitempty"`
	PendingReason     string               `json:"pending_reason,omitempty"`
	// Beyond Ray: the GPUs of the actor's worker (NVML indices) and its
	// CUDA_VISIBLE_DEVICES.
	GPUIDs             []int32 `json:"gpu_ids"`
	CUDAVisibleDevices string  `json:"cuda_visible_devices"`
}

// actorStateName is Ray's name of an actor state: the proto's without "ACTOR_".
func actorStateName(s pb.ActorState) string { return strings.TrimPrefix(s.String(), "ACTOR_") }

func toActorState(a *pb.ActorInfo) actorState {
	s := actorState{
		ActorID: a.ActorId, ClassName: a.ClassName, State: actorStateName(a.State), Name: a.Name, RayNamespace: a.Namespace,
		JobID: a.JobId, NodeID: a.NodeId, PID: a.Pid, PlacementGroupID: a.PlacementGroupId, RequiredResources: jsonFloats(a.RequiredResources),
		IsDetached: a.IsDetached, NumRestarts: a.NumRestarts, MaxRestarts: a.MaxRestarts, DeathCause: a.DeathCause,
		PendingReason: a.PendingReason, GPUIDs: a.GpuIds, CUDAVisibleDevices: a.CudaVisibleDevices,
	}
	if s.GPUIDs == nil {
		s.GPUIDs = []int32{}
	}
	return s
}

var actorsListing = listing[actorState]{
	name:        "list actors",
	description: "List the cluster's actors, DEAD ones included for a while (1 hour, at most 1000).\nJSON fields follow Ray's state API (namespace is ray_namespace).",
	examples:    "  raygo list actors\n  raygo list actors --format json | jq '.[] | select(.state == \"ALIVE\")'\n",
	fetch: func(ctx context.Context, c *gcsClient) ([]actorState, error) {
		reply, err := c.actors.GetAllActorInfo(ctx, &pb.GetAllActorInfoRequest{})
		if err != nil {
			return nil, err
		}
		states := make([]actorState, len(reply.Actors))
		for i, a := range reply.Actors {
			states[i] = toActorState(a)
		}
		return states, nil
	},
	header: "ACTOR_ID\tCLASS_NAME\tNAME\tSTATE\tNODE_ID\tPID\tRESTARTS\tGPUS\tREASON",
	row: func(s actorState) string {
		node, pid, gpus := "-", "-", "-"
		if s.NodeID != "" {
			node = shortID(s.NodeID)
		}
		if s.PID != 0 {
			pid = fmt.Sprint(s.PID)
		}
		if s.CUDAVisibleDevices != "" {
			gpus = s.CUDAVisibleDevices
		}
		restarts := fmt.Sprintf("%d/%d", s.NumRestarts, s.MaxRestarts)
		if s.MaxRestarts == -1 {
			restarts = fmt.Sprintf("%d/inf", s.NumRestarts)
		}
		reason := s.DeathCause + s.PendingReason // at most one is set
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", s.ActorID, s.ClassName, s.Name, s.State, node, pid, restarts, gpus, reason)
	},
}

// printActorStatus counts actors by state and lists those not ALIVE yet with why.
func printActorStatus(w io.Writer, actors []*pb.ActorInfo) {
	fmt.Fprintf(w, "\nActors\n%s\n", strings.Repeat("-", 64))
	counts := map[string]int{}
	var waiting []*pb.ActorInfo
	for _, a := range actors {
		counts[actorStateName(a.State)]++
		if a.State == pb.ActorState_ACTOR_PENDING_CREATION || a.State == pb.ActorState_ACTOR_RESTARTING {
			waiting = append(waiting, a)
		}
	}
	var parts []string
	for _, state := range []string{"ALIVE", "PENDING_CREATION", "RESTARTING", "DEAD"} {
		if counts[state] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[state], state))
		}
	}
	if len(parts) == 0 {
		fmt.Fprintln(w, " (none)")
		return
	}
	fmt.Fprintf(w, " %s\n", strings.Join(parts, ", "))
	if len(waiting) == 0 {
		return
	}
	fmt.Fprintln(w, "Pending:")
	for _, a := range waiting {
		reason := a.PendingReason
		if reason == "" {
			reason = "waiting for its first scheduling attempt"
		}
		fmt.Fprintf(w, " actor_%s %s %s: %s\n", shortID(a.ActorId), a.ClassName, actorStateName(a.State), reason)
	}
}
