package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/raygo-dev/raygo/internal/stateapi"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

var actorsListing = listing[stateapi.Actor]{
	name:        "list actors",
	description: "List the cluster's actors, DEAD ones included for a while (1 hour, at most 1000).\nJSON fields follow Ray's state API (namespace is ray_namespace).",
	examples:    "  raygo list actors\n  raygo list actors --format json | jq '.[] | select(.state == \"ALIVE\")'\n",
	fetch: func(ctx context.Context, c *gcsClient) ([]stateapi.Actor, error) {
		reply, err := c.actors.GetAllActorInfo(ctx, &pb.GetAllActorInfoRequest{})
		if err != nil {
			return nil, err
		}
		states := make([]stateapi.Actor, len(reply.Actors))
		for i, a := range reply.Actors {
			states[i] = stateapi.FromActor(a)
		}
		return states, nil
	},
	header: "ACTOR_ID\tCLASS_NAME\tNAME\tSTATE\tNODE_ID\tPID\tRESTARTS\tGPUS\tREASON",
	row: func(s stateapi.Actor) string {
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
		counts[stateapi.ActorStateName(a.State)]++
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
		fmt.Fprintf(w, " actor_%s %s %s: %s\n", shortID(a.ActorId), a.ClassName, stateapi.ActorStateName(a.State), reason)
	}
}
