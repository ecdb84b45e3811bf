package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	pendingreason "github.com/raygo-dev/raygo/internal/pending"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// The autoscaler's sections of `raygo status`, laid out as Ray's `ray status`
// (format_info_string): idle nodes, pending nodes and recent failures under "Node
// status"; the request_resources constraint and the pending demands under "Resources".
// They read AutoscalerStateService.GetClusterStatus; the pending nodes and failures come
// from the autoscaler's last report, so they are empty on a cluster without one.

// maxFailuresShown is how many recent failures are listed, newest first (Ray's
// AUTOSCALER_MAX_FAILURES_DISPLAYED).
const maxFailuresShown = 20

// printIdleNodes lists the idle alive nodes (not draining), longest idle first.
func printIdleNodes(w io.Writer, state *pb.ClusterResourceState) {
	var idle []*pb.AutoscalerNodeState
	for _, n := range state.GetNodeStates() {
		if n.Status == pb.NodeStatus_NODE_STATUS_IDLE {
			idle = append(idle, n)
		}
	}
	sort.SliceStable(idle, func(i, j int) bool { return idle[i].IdleDurationMs > idle[j].IdleDurationMs })
	fmt.Fprintf(w, "Idle: %d\n", len(idle))
	for _, n := range idle {
		line := fmt.Sprintf(" node_%s  %s", shortID(n.NodeId), n.NodeIpAddress)
		if n.RayNodeTypeName != "" {
			line += "  " + n.RayNodeTypeName
		}
		fmt.Fprintf(w, "%s  (idle %s)\n", line, (time.Duration(n.IdleDurationMs) * time.Millisecond).Round(time.Second))
	}
}

// printPendingNodes prints Ray's "Pending:" (instances requested or launching) and
// "Recent failures:" from the autoscaler's report. The report is up to a tick old: an
// instance whose node has registered since is no longer pending.
func printPendingNodes(w io.Writer, reported *pb.AutoscalingState, state *pb.ClusterResourceState) {
	registered := map[string]bool{}
	for _, n := range state.GetNodeStates() {
		if n.InstanceId != "" && n.Status != pb.NodeStatus_NODE_STATUS_DEAD {
			registered[n.InstanceId] = true
		}
	}
	fmt.Fprintln(w, "Pending:")
	var lines []string
	for _, r := range reported.GetPendingInstanceRequests() {
		lines = append(lines, fmt.Sprintf(" %s, %d launching", nodeTypeName(r.RayNodeTypeName, r.InstanceTypeName), r.Count))
	}
	for _, p := range reported.GetPendingInstances() {
		if registered[p.InstanceId] {
			continue
		}
		where := p.IpAddress
		if where == "" {
			where = p.InstanceId
		}
		lines = append(lines, fmt.Sprintf(" %s: %s, %s", where, nodeTypeName(p.RayNodeTypeName, p.InstanceTypeName), strings.ToLower(p.Details)))
	}
	printLinesOr(w, lines, " (no pending nodes)")

	fmt.Fprintln(w, "Recent failures:")
	failures := append([]*pb.FailedInstanceRequest(nil), reported.GetFailedInstanceRequests()...)
	sort.SliceStable(failures, func(i, j int) bool { return failures[i].FailedTs > failures[j].FailedTs })
	if len(failures) > maxFailuresShown {
		failures = failures[:maxFailuresShown]
	}
	lines = lines[:0]
	for _, f := range failures {
		line := fmt.Sprintf(" %s: %s", nodeTypeName(f.RayNodeTypeName, f.InstanceTypeName), f.Reason)
		if f.Count > 1 {
			line += fmt.Sprintf(" (%d instances)", f.Count)
		}
		if f.FailedTs > 0 {
			line += " (latest_attempt: " + time.Unix(f.FailedTs, 0).UTC().Format("15:04:05") + ")"
		}
		lines = append(lines, line)
	}
	printLinesOr(w, lines, " (no failures)")
}

// printDemands prints Ray's "From request_resources:" and "Pending Demands:" sections:
// the constraint, then pending actor shapes and placement groups with their pending
// reason code, then what the autoscaler reported infeasible, with why.
func printDemands(w io.Writer, state *pb.ClusterResourceState, reported *pb.AutoscalingState) {
	fmt.Fprintln(w, "From request_resources:")
	var lines []string
	for _, c := range state.GetClusterResourceConstraints() {
		for _, r := range c.ResourceRequests {
			lines = append(lines, fmt.Sprintf(" %s: %d from request_resources()", requestString(r.Request), r.Count))
		}
	}
	printLinesOr(w, lines, " (none)")

	fmt.Fprintln(w, "Pending Demands:")
	lines = lines[:0]
	for _, r := range state.GetPendingResourceRequests() {
		lines = append(lines, fmt.Sprintf(" %s: %d+ pending tasks/actors%s", requestString(r.Request), r.Count, reasonSuffix(r.PendingReason)))
	}
	type groupShape struct {
		text, reason string
		count        int
	}
	var shapes []*groupShape
	byText := map[string]*groupShape{}
	for _, g := range state.GetPendingGangResourceRequests() {
		text := gangString(g)
		key := text + "|" + g.PendingReason
		if s := byText[key]; s != nil {
			s.count++
			continue
		}
		s := &groupShape{text: text, reason: g.PendingReason, count: 1}
		byText[key] = s
		shapes = append(shapes, s)
	}
	for _, s := range shapes {
		lines = append(lines, fmt.Sprintf(" %s: %d+ pending placement groups%s", s.text, s.count, reasonSuffix(s.reason)))
	}
	lines = append(lines, infeasibleLines(reported)...)
	printLinesOr(w, lines, " (no resource demands)")
}

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

// requestString prints a bundle as Ray prints a Python dict, CPU, GPU and memory first,
// with its label selector after it.
func requestString(r *pb.ResourceRequest) string {
	names := make([]string, 0, len(r.GetResourcesBundle()))
	for name := range r.GetResourcesBundle() {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return resourceOrder(names[i]) < resourceOrder(names[j]) })
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("'%s': %s", name, pythonFloat(r.ResourcesBundle[name]))
	}
	out := "{" + strings.Join(parts, ", ") + "}"
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

// pythonFloat prints a float as Python's repr does for these amounts: 1.0, 0.5, 16.0.
func pythonFloat(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// reasonSuffix shows a pending reason code; NoResources is what pending means anyway.
func reasonSuffix(code string) string {
	if code == "" || code == string(pendingreason.NoResources) {
		return ""
	}
	return " (" + code + ")"
}

func nodeTypeName(rayType, instanceType string) string {
	if rayType != "" {
		return rayType
	}
	return instanceType
}

func printLinesOr(w io.Writer, lines []string, none string) {
	if len(lines) == 0 {
		fmt.Fprintln(w, none)
		return
	}
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}
