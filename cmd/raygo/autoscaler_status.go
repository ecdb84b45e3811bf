package main

import (
	"fmt"
	"sort"
	"strings"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// raygo's lines on the autoscaler's infeasible demand in `raygo status`, after Ray's
// text (ray_status.go): what the autoscaler's last report says no node type can hold,
// and why, with demand printed as Ray prints it.

// maxFailuresShown is how many recent failures are listed, newest first (Ray's
// AUTOSCALER_MAX_FAILURES_DISPLAYED).
const maxFailuresShown = 20

// infeasibleLines names the demand the autoscaler reported no node type can serve.
func infeasibleLines(reported *pb.AutoscalingState) []string {
	reasons := reported.GetInfeasibleReasons()
	next := 0
	why := func() string {
		defer func() { next++ }()
		if next < len(reasons) && reasons[next] != "" {
			return ": " + reasons[next]
		}
		return ""
	}
	var lines []string
	for _, r := range reported.GetInfeasibleResourceRequests() {
		lines = append(lines, fmt.Sprintf(" Infeasible: %s%s", requestString(r), why()))
	}
	for _, g := range reported.GetInfeasibleGangResourceRequests() {
		lines = append(lines, fmt.Sprintf(" Infeasible: %s%s", gangString(g), why()))
	}
	for _, c := range reported.GetInfeasibleClusterResourceConstraints() {
		var parts []string
		for _, r := range c.ResourceRequests {
			parts = append(parts, fmt.Sprintf("%s * %d", requestString(r.Request), r.Count))
		}
		lines = append(lines, fmt.Sprintf(" Infeasible: request_resources(%s)%s", strings.Join(parts, ", "), why()))
	}
	return lines
}

// gangString is a group as Ray prints one: its bundles still to place, identical ones
// counted, and the strategy: "{'GPU': 1.0} * 8 (STRICT_PACK)".
func gangString(g *pb.GangResourceRequest) string {
	var parts []string
	counts := map[string]int{}
	for _, r := range g.Requests {
		s := requestString(r)
		if counts[s] == 0 {
			parts = append(parts, s)
		}
		counts[s]++
	}
	for i, p := range parts {
		parts[i] = fmt.Sprintf("%s * %d", p, counts[p])
	}
	return fmt.Sprintf("%s (%s)", strings.Join(parts, ", "), g.Strategy)
}

// requestString prints a bundle as Ray prints its dict (pythonDict), with its label
// selector after it.
func requestString(r *pb.ResourceRequest) string {
	out := pythonDict(r.GetResourcesBundle())
	if len(r.GetLabelSelector()) > 0 {
		keys := make([]string, 0, len(r.LabelSelector))
		for k := range r.LabelSelector {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		selector := make([]string, len(keys))
		for i, k := range keys {
			selector[i] = fmt.Sprintf("'%s': '%s'", k, r.LabelSelector[k])
		}
		out += " label_selector={" + strings.Join(selector, ", ") + "}"
	}
	return out
}
