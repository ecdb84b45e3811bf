package main

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// formatRayStatus is `ray status`'s text for the cluster, as Ray 2.60's autoscaler v2
// prints it (autoscaler/v2/utils.py: ClusterStatusParser and ClusterStatusFormatter),
// from the same GetClusterStatus reply: the header with the time, "Node status" (active
// and idle nodes counted by node type, pending launches and instances, recent failures)
// and "Resources" (usage over the nodes not dead, the request_resources constraint, the
// pending demands). Golden files written by Ray's own formatter keep it identical
// (testdata/status). now is the header's time, printed in the local zone as Ray does.
//
// Where Ray's output depends on Python's hash order (the keys of a bundle with several
// resources in a placement group's demand), raygo sorts them.
func formatRayStatus(reply *pb.GetClusterStatusReply, now time.Time, verbose bool) string {
	state := reply.GetClusterResourceState()
	reported := reply.GetAutoscalingState()
	header := strings.Repeat("=", 8) + " Autoscaler status: " + pythonDatetime(now) + " " + strings.Repeat("=", 8)
	separator := strings.Repeat("-", len(header))

	var active, idle, dead []*pb.AutoscalerNodeState
	for _, n := range state.GetNodeStates() {
		switch n.Status {
		case pb.NodeStatus_NODE_STATUS_DEAD:
			dead = append(dead, n)
		case pb.NodeStatus_NODE_STATUS_IDLE:
			idle = append(idle, n)
		default:
			active = append(active, n)
		}
	}
	lines := []string{header, "Node status", separator,
		"Active:", countByType(active, " (no active nodes)"),
		"Idle:", countByType(idle, " (no idle nodes)"),
		"Pending:", pendingNodeReport(reported),
		failureReport(reported, dead, verbose),
		"",
		"Resources", separator,
		"Total Usage:", clusterUsageReport(state, verbose),
		"From request_resources:", constraintReport(state),
		"Pending Demands:", demandReport(state),
		"",
	}
	if verbose {
		lines[len(lines)-1] = nodeUsageReport(append(active, idle...))
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// rayNodeType is the node's type for Ray's counts: node_<id> for a node no autoscaler
// launched.
func rayNodeType(n *pb.AutoscalerNodeState) string {
	if n.RayNodeTypeName == "" {
		return "node_" + n.NodeId
	}
	return n.RayNodeTypeName
}

// countByType counts nodes by type in order of first appearance.
func countByType(nodes []*pb.AutoscalerNodeState, none string) string {
	var order []string
	counts := map[string]int{}
	for _, n := range nodes {
		t := rayNodeType(n)
		if counts[t] == 0 {
			order = append(order, t)
		}
		counts[t]++
	}
	if len(order) == 0 {
		return none
	}
	out := make([]string, len(order))
	for i, t := range order {
		out[i] = fmt.Sprintf(" %d %s", counts[t], t)
	}
	return strings.Join(out, "\n")
}

// pendingNodeReport is Ray's "Pending:" lines. As Ray, launch requests are counted by
// request, not by the instances each asks for.
func pendingNodeReport(reported *pb.AutoscalingState) string {
	var order []string
	counts := map[string]int{}
	for _, r := range reported.GetPendingInstanceRequests() {
		if counts[r.RayNodeTypeName] == 0 {
			order = append(order, r.RayNodeTypeName)
		}
		counts[r.RayNodeTypeName]++
	}
	var lines []string
	for _, t := range order {
		lines = append(lines, fmt.Sprintf(" %s, %d launching", t, counts[t]))
	}
	for _, p := range reported.GetPendingInstances() {
		lines = append(lines, fmt.Sprintf(" %s: %s, %s", p.InstanceId, p.RayNodeTypeName, strings.ToLower(p.Details)))
	}
	if len(lines) == 0 {
		return " (no pending nodes)"
	}
	return strings.Join(lines, "\n")
}

// failureReport is Ray's "Recent failures:": failed launches newest first (with why when
// verbose), then dead nodes, at most maxFailuresShown.
func failureReport(reported *pb.AutoscalingState, dead []*pb.AutoscalerNodeState, verbose bool) string {
	launches := append([]*pb.FailedInstanceRequest(nil), reported.GetFailedInstanceRequests()...)
	sort.SliceStable(launches, func(i, j int) bool { return launches[i].StartTs > launches[j].StartTs })
	var lines []string
	for _, f := range launches {
		at := time.Unix(f.StartTs, 0)
		line := fmt.Sprintf(" %s: LaunchFailed (latest_attempt: %02d:%02d:%02d)", f.RayNodeTypeName, at.Hour(), at.Minute(), at.Second())
		if verbose {
			line += " - " + f.Reason
		}
		lines = append(lines, line)
	}
	for _, n := range dead {
		lines = append(lines, fmt.Sprintf(" %s: NodeTerminated (instance_id: %s)", rayNodeType(n), n.InstanceId))
	}
	if len(lines) > maxFailuresShown {
		lines = lines[:maxFailuresShown]
	}
	if len(lines) == 0 {
		return "Recent failures:\n (no failures)"
	}
	return "Recent failures:\n" + strings.Join(lines, "\n")
}

// placementGroupResource is Ray's pattern of a placement group's own resources
// (CPU_group_<id>, CPU_group_0_<id>), left out of the usage as Ray does.
var placementGroupResource = regexp.MustCompile(`^.+_group_([0-9a-zA-Z]+|[0-9]+_[0-9a-zA-Z]+)$`)

// clusterUsageReport is Ray's "Total Usage:" lines over the nodes not dead, then a blank
// line.
func clusterUsageReport(state *pb.ClusterResourceState, verbose bool) string {
	used, total := map[string]float64{}, map[string]float64{}
	for _, n := range state.GetNodeStates() {
		if n.Status != pb.NodeStatus_NODE_STATUS_DEAD {
			addUsage(n, used, total)
		}
	}
	return strings.Join(append(usageLines(used, total, verbose, " "), ""), "\n")
}

// addUsage adds a node's use (total less available) and total per resource.
func addUsage(n *pb.AutoscalerNodeState, used, total map[string]float64) {
	for name, amount := range n.TotalResources {
		total[name] += amount
		used[name] += amount
	}
	for name, amount := range n.AvailableResources {
		used[name] -= amount
	}
}

// usageLines is Ray's parse_usage: "used/total name" per resource sorted by name,
// node:<ip> and placement-group resources left out, accelerator types too unless
// verbose, memory in binary units; each line after indent.
func usageLines(used, total map[string]float64, verbose bool, indent string) []string {
	names := make([]string, 0, len(used))
	for name := range used {
		names = append(names, name)
	}
	sort.Strings(names)
	var lines []string
	for _, name := range names {
		switch {
		case strings.Contains(name, "node:"), placementGroupResource.MatchString(name), strings.HasPrefix(name, "accelerator_type:") && !verbose:
			continue
		case name == "memory" || name == "object_store_memory":
			lines = append(lines, fmt.Sprintf("%s%s/%s %s", indent, pythonMemory(used[name]), pythonMemory(total[name]), name))
		default:
			lines = append(lines, fmt.Sprintf("%s%s/%s %s", indent, pythonFloat(used[name]), pythonFloat(total[name]), name))
		}
	}
	return lines
}

// nodeUsageReport is Ray's per-node report of `ray status -v`: each active then idle node
// with its instance and type, id, idle time, usage and activity.
func nodeUsageReport(nodes []*pb.AutoscalerNodeState) string {
	var lines []string
	for _, n := range nodes {
		lines = append(lines, "", fmt.Sprintf("Node: %s (%s)", n.InstanceId, rayNodeType(n)), " Id: "+n.NodeId)
		if n.Status == pb.NodeStatus_NODE_STATUS_IDLE && n.IdleDurationMs > 0 {
			lines = append(lines, fmt.Sprintf(" Idle: %d ms", n.IdleDurationMs))
		}
		used, total := map[string]float64{}, map[string]float64{}
		addUsage(n, used, total)
		lines = append(lines, " Usage:")
		lines = append(lines, usageLines(used, total, true, "  ")...)
		lines = append(lines, " Activity:")
		if len(n.NodeActivity) == 0 {
			lines = append(lines, "  (no activity)")
		}
		for _, a := range n.NodeActivity {
			lines = append(lines, "  "+a)
		}
	}
	return strings.Join(lines, "\n")
}

// constraintReport is Ray's "From request_resources:" lines.
func constraintReport(state *pb.ClusterResourceState) string {
	var lines []string
	for _, c := range state.GetClusterResourceConstraints() {
		for _, r := range c.ResourceRequests {
			lines = append(lines, fmt.Sprintf(" %s: %d from request_resources()", pythonDict(r.GetRequest().GetResourcesBundle()), r.Count))
		}
	}
	if len(lines) == 0 {
		return " (none)"
	}
	return strings.Join(lines, "\n")
}

// demandReport is Ray's "Pending Demands:" lines: tasks and actors by shape, then
// placement groups by strategy and state (as Ray, groups of one strategy and state are
// one line, with the bundles of the last of them).
func demandReport(state *pb.ClusterResourceState) string {
	var lines []string
	var shapes []string
	counts := map[string]int64{}
	for _, r := range state.GetPendingResourceRequests() {
		bundle := r.GetRequest().GetResourcesBundle()
		if len(bundle) == 0 {
			continue
		}
		key := pythonDict(bundle)
		if _, seen := counts[key]; !seen {
			shapes = append(shapes, key)
		}
		counts[key] += r.Count
	}
	for _, s := range shapes {
		lines = append(lines, fmt.Sprintf(" %s: %d+ pending tasks/actors", s, counts[s]))
	}
	var keys []string
	freq := map[string]int{}
	last := map[string]*pb.GangResourceRequest{}
	strategy := map[string]string{}
	for _, g := range state.GetPendingGangResourceRequests() {
		// Ray parses "<id>:<strategy>|<state>"; other details leave both None.
		key, strat := "None|None", "None"
		if _, rest, ok := strings.Cut(g.Details, ":"); ok {
			if s, st, ok := strings.Cut(rest, "|"); ok {
				key, strat = s+"|"+st, s
			}
		}
		if freq[key] == 0 {
			keys = append(keys, key)
		}
		freq[key]++
		last[key], strategy[key] = g, strat
	}
	for _, key := range keys {
		var order []string
		count := map[string]int{}
		for _, r := range last[key].Requests {
			b := pythonDict(r.GetResourcesBundle())
			if count[b] == 0 {
				order = append(order, b)
			}
			count[b]++
		}
		parts := make([]string, len(order))
		for i, b := range order {
			parts[i] = fmt.Sprintf("%s * %d", b, count[b])
		}
		lines = append(lines, fmt.Sprintf(" %s (%s): %d+ pending placement groups", strings.Join(parts, ", "), strategy[key], freq[key]))
	}
	if len(lines) == 0 {
		return " (no resource demands)"
	}
	return strings.Join(lines, "\n")
}

// pythonDict prints resource amounts as Python prints a dict of str to float, keys
// sorted.
func pythonDict(amounts map[string]float64) string {
	names := make([]string, 0, len(amounts))
	for name := range amounts {
		names = append(names, name)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("'%s': %s", name, pythonFloat(amounts[name]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// pythonFloat prints a float as Python's repr does: the shortest digits, with ".0" on
// whole numbers, and an exponent below 1e-4 and from 1e16.
func pythonFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	case math.IsNaN(v):
		return "nan"
	}
	if a := math.Abs(v); a != 0 && (a < 1e-4 || a >= 1e16) {
		s := strconv.FormatFloat(v, 'e', -1, 64)
		mantissa, exponent, _ := strings.Cut(s, "e")
		sign, digits := exponent[:1], strings.TrimLeft(exponent[1:], "0")
		if len(digits) < 2 {
			digits = strings.Repeat("0", 2-len(digits)) + digits
		}
		return mantissa + "e" + sign + digits
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// pythonMemory is Ray's format_memory: two decimals in the largest binary unit the
// amount reaches, else whole bytes.
func pythonMemory(bytes float64) string {
	for _, unit := range []struct {
		suffix string
		size   float64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if bytes >= unit.size {
			return fmt.Sprintf("%.2f%s", bytes/unit.size, unit.suffix)
		}
	}
	return fmt.Sprintf("%dB", int64(bytes))
}

// pythonDatetime prints t as Python's str(datetime) does, in the local zone:
// "2026-11-26 15:04:05.123456", without the fraction when it is zero.
func pythonDatetime(t time.Time) string {
	t = t.Local()
	if us := t.Nanosecond() / 1000; us != 0 {
		return t.Format("2006-01-02 15:04:05") + fmt.Sprintf(".%06d", us)
	}
	return t.Format("2006-01-02 15:04:05")
}
