package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/raygo-dev/raygo/internal/auth"
	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	"github.com/raygo-dev/raygo/internal/stateapi"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

func runStop(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("stop", "Stop every raygo node that 'raygo start' left running on this machine:\nSIGTERM to each node's supervisor, SIGKILL after --grace.",
		"  raygo stop\n  raygo stop --force\n", stdout)
	force := fs.Bool("force", false, "SIGKILL at once")
	grace := fs.Duration("grace", 15*time.Second, "how long to wait for a clean stop before SIGKILL")
	temp := fs.String("temp-dir", "", "root of session directories (default: RAYGO_TEMP_DIR, else "+defaultTempDir+")")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	records, err := runningNodeRecords(tempDir(*temp))
	if err != nil {
		return err
	}
	// Nodes an autoscaler launched that have not registered yet have no record: the
	// clusters' provider state names them (after the heads, below).
	clusters, _ := filepath.Glob(filepath.Join(tempDir(*temp), "clusters", "*"))
	if len(records) == 0 && !anyInstance(clusters) {
		fmt.Fprintln(stdout, "No raygo nodes are running on this machine.")
		return nil
	}
	// Workers first, head last, so raylets say goodbye to a live GCS; but a head that runs
	// an autoscaler goes first, or it would launch nodes again for the ones stopping.
	rank := func(r nodeRecord) int {
		switch {
		case r.Autoscaler:
			return 0
		case !r.IsHead:
			return 1
		}
		return 2
	}
	sort.SliceStable(records, func(i, j int) bool { return rank(records[i]) < rank(records[j]) })
	signal := syscall.SIGTERM
	if *force {
		signal = syscall.SIGKILL
	}
	for _, rec := range records {
		stopSupervisor(rec, signal, *grace, stderr)
		kind := "node"
		if rec.IsHead {
			kind = "head node"
		}
		fmt.Fprintf(stdout, "Stopped %s %s (pid %d)\n", kind, shortID(rec.NodeID), rec.SupervisorPID)
	}
	stopped := len(records)
	for _, dir := range clusters {
		n, err := terminateClusterInstances(dir, *grace)
		if err != nil {
			fmt.Fprintf(stderr, "raygo: %s: %v\n", dir, err)
		}
		stopped += n
	}
	fmt.Fprintf(stdout, "Stopped %d raygo node(s).\n", stopped)
	return nil
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func runStatus(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("status", "Print a summary of the cluster: first 'ray status''s text, as Ray 2.60 prints it\n(nodes active and idle by type, pending launches, recent failures; resources used /\ntotal, the request_resources constraint, the pending demands); then raygo's own: the\nstore, every node with its drain or death reason, MIG slot maps, the demand the\nautoscaler reports infeasible and why, and the placement groups and actors that wait,\nwith the reason.",
		"  raygo status\n  raygo status -v\n  raygo status --address 10.0.0.1:6380\n", stdout)
	address := addressFlag(fs)
	verbose := fs.Bool("v", false, "verbose, as ray status -v: each node's usage and activity, and accelerator types")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	c, err := dialGCS(*address)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := callContext()
	defer cancel()
	info, err := c.nodes.GetClusterInfo(ctx, &pb.GetClusterInfoRequest{})
	if err != nil {
		return err
	}
	reply, err := c.nodes.GetAllNodeInfo(ctx, &pb.GetAllNodeInfoRequest{})
	if err != nil {
		return err
	}
	groups, err := c.pgs.GetAllPlacementGroup(ctx, &pb.GetAllPlacementGroupRequest{})
	if err != nil {
		return err
	}
	actors, err := c.actors.GetAllActorInfo(ctx, &pb.GetAllActorInfoRequest{})
	if err != nil {
		return err
	}
	autoscaling, err := c.autoscaler.GetClusterStatus(ctx, &pb.GetClusterStatusRequest{})
	if err != nil {
		return err
	}
	printStatus(stdout, c.address, info, reply.Nodes, autoscaling, time.Now(), *verbose)
	printGPUModels(stdout, reply.Nodes)
	printFragmentation(stdout, info.DashboardAddress)
	if queues, err := pb.NewQueueServiceClient(c.conn).ListQueues(ctx, &pb.ListQueuesRequest{}); err == nil && queues.Enabled {
		fmt.Fprintf(stdout, "\nQueues\n%s\n", strings.Repeat("-", 64))
		if err := printQueueTable(stdout, queues.Queues); err != nil {
			return err
		}
	}
	printPlacementGroupStatus(stdout, groups.PlacementGroups)
	printActorStatus(stdout, actors.Actors)
	return nil
}

// printStatus prints Ray's `ray status` text for the cluster (formatRayStatus, at
// now), then raygo's own: the store, every node by state with its name and its drain or
// death reason, the MIG slot maps, the autoscaler's recent failures and the demand it
// reported infeasible, each with why.
func printStatus(w io.Writer, address string, info *pb.GetClusterInfoReply, nodes []*pb.NodeInfo, autoscaling *pb.GetClusterStatusReply, now time.Time, verbose bool) {
	fmt.Fprintln(w, formatRayStatus(autoscaling, now, verbose))
	rule := strings.Repeat("-", 64)
	fmt.Fprintf(w, "\n======== raygo: %s (GCS epoch %d, %s store) ========\n", address, info.GcsEpoch, info.Store)
	if info.Store == "memory" && info.StartTimeMs > 0 {
		// The memory store starts empty with every GCS start: say since when it holds what it holds.
		fmt.Fprintf(w, "The memory store is volatile: emptied when this GCS started, %s; groups, actors and jobs from before are gone.\n",
			time.UnixMilli(info.StartTimeMs).UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "Nodes\n%s\n", rule)
	var alive, draining, dead []string
	for _, n := range nodes {
		line := fmt.Sprintf(" node_%s  %s", shortID(n.NodeId), n.NodeIp)
		if n.NodeName != "" && n.NodeName != n.NodeIp {
			line += "  " + n.NodeName
		}
		if n.IsHeadNode {
			line += "  (head)"
		}
		switch {
		case n.State == pb.NodeState_DEAD:
			dead = append(dead, line+"  -- "+n.DeathReason)
		case n.IsDraining:
			draining = append(draining, line+drainText(n))
		default:
			if n.StateMessage != "" {
				line += "  -- " + n.StateMessage
			}
			alive = append(alive, line)
		}
	}
	printGroup := func(title string, lines []string) {
		fmt.Fprintf(w, "%s: %d\n", title, len(lines))
		for _, l := range lines {
			fmt.Fprintln(w, l)
		}
	}
	printGroup("Alive", alive)
	printGroup("Draining", draining)
	printGroup("Dead", dead)
	printMIGStatus(w, nodes)
	if failures := autoscaling.GetAutoscalingState().GetFailedInstanceRequests(); len(failures) > 0 {
		// Ray's lines above name the type only (with -v, why): here each says why.
		fmt.Fprintln(w, "Recent failures (why):")
		for _, f := range failures {
			name := f.RayNodeTypeName
			if name == "" {
				name = "(gang)"
			}
			fmt.Fprintf(w, " %s: %s (%s)\n", name, f.Reason, time.Unix(f.FailedTs, 0).UTC().Format("15:04:05 UTC"))
		}
	}
	if lines := infeasibleLines(autoscaling.GetAutoscalingState()); len(lines) > 0 {
		fmt.Fprintln(w, "Infeasible (autoscaler):")
		for _, l := range lines {
			fmt.Fprintln(w, l)
		}
	}
}

// printMIGStatus sums the MIG slot maps of the alive nodes: instances held and idle, and
// memory slices free.
func printMIGStatus(w io.Writer, nodes []*pb.NodeInfo) {
	gpus, held, idle, freeSlices := 0, 0, 0, 0
	for _, n := range nodes {
		if n.State != pb.NodeState_ALIVE {
			continue
		}
		for _, g := range n.MigGpus {
			gpus++
			used := 0
			model, _ := mig.ModelOfDevice(g.Model)
			for _, in := range g.Instances {
				if in.Held {
					held++
				} else {
					idle++
				}
				if profile, ok := model.ProfileByID(int(in.ProfileId)); ok {
					used += profile.MemorySlices
				}
			}
			freeSlices += mig.MemorySlices - used
		}
	}
	if gpus > 0 {
		fmt.Fprintf(w, " MIG: %d GPU(s) in MIG mode: %d instance(s) held, %d idle, %d memory slice(s) free\n", gpus, held, idle, freeSlices)
	}
}

func drainText(n *pb.NodeInfo) string {
	if n.DrainReason == "" {
		return "  (draining)"
	}
	return "  (draining: " + n.DrainReason + ")"
}

// resourceOrder lists CPU, GPU and memory first, as 'ray status' does, then by name.
func formatAmount(v float64) string {
	return fmt.Sprintf("%.1f", math.Round(v*10000)/10000)
}

func formatBytes(v float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f%s", v, units[i])
	}
	return fmt.Sprintf("%.2f%s", v, units[i])
}

func runList(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprint(stdout, "Usage: raygo list <resource> [flags]\n\nResources:\n  nodes             the node table (Ray's state API fields)\n  placement-groups  the placement-group table (Ray's state API fields)\n  actors            the actor table (Ray's state API fields)\n\nToken (with auth on): "+commandScopes["list"]+".\n\nExamples:\n  raygo list nodes\n  raygo list placement-groups --format json\n  raygo list actors --format json\n")
			return errHelp
		}
		return badInput("list: name what to list: nodes, placement-groups or actors (see 'raygo list --help')")
	}
	switch args[0] {
	case "nodes":
		return runListing(nodesListing, args[1:], stdout)
	case "placement-groups":
		return runListing(placementGroupsListing, args[1:], stdout)
	case "actors":
		return runListing(actorsListing, args[1:], stdout)
	}
	return badInput("list: unknown resource %q: must be nodes, placement-groups or actors", args[0])
}

// listing is one `raygo list` resource: its help, how to fetch its rows (Ray's state-API
// shape, printed as they are with --format json) and how to print one as a table line.
type listing[S any] struct {
	name, description, examples string
	fetch                       func(context.Context, *gcsClient) ([]S, error)
	header                      string
	row                         func(S) string // tab-separated, no newline
}

// runListing parses the flags every `raygo list` command shares (--address, --format,
// --detail), fetches the rows from the GCS and prints them as JSON or as a table.
func runListing[S any](l listing[S], args []string, stdout io.Writer) error {
	fs := newFlagSet(l.name, l.description, l.examples, stdout)
	address := addressFlag(fs)
	format := fs.String("format", "table", "output format: table or json")
	detail := fs.String("detail", "all", "with --format json, the columns, as the state API's detail parameter: all (raygo's whole rows), false (Ray's base columns, as `ray list`) or true (every column of Ray's schema, as `ray list --detail`)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *format != "table" && *format != "json" {
		return badInput("--format %q: must be table or json", *format)
	}
	columns, err := stateapi.ParseColumns(*detail)
	if err != nil {
		return badInput("--%v", err)
	}
	c, err := dialGCS(*address)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := callContext()
	defer cancel()
	rows, err := l.fetch(ctx, c)
	if err != nil {
		return err
	}
	if *format == "json" {
		projected, err := stateapi.Project(rows, columns)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(projected)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, l.header)
	for _, row := range rows {
		fmt.Fprintln(tw, l.row(row))
	}
	return tw.Flush()
}

var nodesListing = listing[stateapi.Node]{
	name:        "list nodes",
	description: "List the cluster's nodes, alive and dead. JSON fields follow Ray's state API.",
	examples:    "  raygo list nodes\n  raygo list nodes --format json | jq '.[] | select(.state == \"ALIVE\")'\n",
	fetch: func(ctx context.Context, c *gcsClient) ([]stateapi.Node, error) {
		reply, err := c.nodes.GetAllNodeInfo(ctx, &pb.GetAllNodeInfoRequest{})
		if err != nil {
			return nil, err
		}
		states := make([]stateapi.Node, len(reply.Nodes))
		for i, n := range reply.Nodes {
			states[i] = stateapi.FromNode(n)
		}
		return states, nil
	},
	header: "NODE_ID\tNODE_IP\tNAME\tSTATE\tDRAINING\tHEAD\tCPU\tGPU\tMEMORY",
	row: func(s stateapi.Node) string {
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%t\t%t\t%s/%s\t%s/%s\t%s", s.NodeID, s.NodeIP, s.NodeName, s.State, s.IsDraining, s.IsHeadNode,
			formatAmount(float64(s.ResourcesAvailable["CPU"])), formatAmount(float64(s.ResourcesTotal["CPU"])),
			formatAmount(float64(s.ResourcesAvailable["GPU"])), formatAmount(float64(s.ResourcesTotal["GPU"])),
			formatBytes(float64(s.ResourcesTotal["memory"])))
	},
}

func runDrain(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("drain", "Mark a node DRAINING: it takes no new work and keeps what it runs. It stays\nALIVE in 'raygo list nodes', with is_draining true. NODE_ID may be a unique prefix.",
		"  raygo drain 3f2a9c\n  raygo drain 3f2a9c41... --reason \"spot interruption\"\n", stdout)
	address := addressFlag(fs)
	reason := fs.String("reason", "", "why the node is drained (shown in status)")
	// Accept NODE_ID before or after the flags.
	var positional []string
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		positional, args = append(positional, args[0]), args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	positional = append(positional, fs.Args()...)
	if len(positional) != 1 {
		return badInput("drain: give exactly one NODE_ID (see 'raygo drain --help')")
	}
	c, err := dialGCS(*address)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := callContext()
	defer cancel()
	all, err := c.nodes.GetAllNodeInfo(ctx, &pb.GetAllNodeInfoRequest{})
	if err != nil {
		return err
	}
	var matches []string
	for _, n := range all.Nodes {
		if strings.HasPrefix(n.NodeId, positional[0]) {
			matches = append(matches, n.NodeId)
		}
	}
	switch {
	case len(matches) == 0:
		return badInput("drain: NODE_ID %q: no such node", positional[0])
	case len(matches) > 1:
		return badInput("drain: NODE_ID %q matches %d nodes; give more characters", positional[0], len(matches))
	}
	reply, err := c.nodes.DrainNode(ctx, &pb.DrainNodeRequest{NodeId: matches[0], Reason: *reason})
	if err != nil {
		return fmt.Errorf("drain %s: %w", matches[0], err)
	}
	fmt.Fprintf(stdout, "Node %s is draining (state %s, is_draining %t)\n", reply.Node.NodeId, reply.Node.State, reply.Node.IsDraining)
	return nil
}

// printGPUModels sums the alive nodes' whole GPUs by model (the accelerator-type label):
// total, allocated (total less what the raylets report available) and free.
func printGPUModels(w io.Writer, nodes []*pb.NodeInfo) {
	type count struct{ total, free float64 }
	byModel := map[string]*count{}
	for _, n := range nodes {
		if n.State != pb.NodeState_ALIVE || n.ResourcesTotal["GPU"] == 0 {
			continue
		}
		model := n.Labels[nodelabel.AcceleratorType]
		if model == "" {
			model = "(unknown model)"
		}
		if byModel[model] == nil {
			byModel[model] = &count{}
		}
		byModel[model].total += n.ResourcesTotal["GPU"]
		byModel[model].free += n.ResourcesAvailable["GPU"]
	}
	if len(byModel) == 0 {
		return
	}
	fmt.Fprintf(w, "\nGPUs by model\n%s\n", strings.Repeat("-", 64))
	models := make([]string, 0, len(byModel))
	for m := range byModel {
		models = append(models, m)
	}
	sort.Strings(models)
	for _, m := range models {
		c := byModel[m]
		fmt.Fprintf(w, " %s: %s total, %s allocated, %s free\n", m, formatAmount(c.total), formatAmount(c.total-c.free), formatAmount(c.free))
	}
}

// printFragmentation shows the head's raygo_gpus_free_unschedulable and
// raygo_gpu_fragmentation_expected, read from its /metrics (the one computation the
// GCS makes of them), when the dashboard port serves it.
func printFragmentation(w io.Writer, dashboard string) {
	fmt.Fprintf(w, "\nFragmentation (free capacity a request of the shape could not use)\n%s\n", strings.Repeat("-", 64))
	if dashboard == "" {
		fmt.Fprintln(w, " (not available: the head serves no dashboard port)")
		return
	}
	lines, err := fetchMetricLines(dashboard, "raygo_gpus_free_unschedulable{", "raygo_gpu_fragmentation_expected ")
	if err != nil {
		fmt.Fprintf(w, " (not available: %v)\n", err)
		return
	}
	for _, line := range lines {
		name, value, _ := strings.Cut(line, " ")
		if shape, ok := strings.CutPrefix(name, `raygo_gpus_free_unschedulable{shape="`); ok {
			shape = strings.TrimSuffix(shape, `"}`)
			unit := "GPU(s) of " + shape + "-GPU islands"
			if strings.HasPrefix(shape, "mig-") {
				unit = "compute slice(s) for " + shape
			}
			fmt.Fprintf(w, " %s %s\n", value, unit)
			continue
		}
		fmt.Fprintf(w, " expected over the recent workload: %s GPU(s)\n", value)
	}
}

// fetchMetricLines reads the head's /metrics at the dashboard address, with the cluster
// token when this machine has one, and returns the lines that start with a prefix.
func fetchMetricLines(dashboard string, prefixes ...string) ([]string, error) {
	tlsConfig, err := rpcutil.HTTPClientTLS()
	if err != nil {
		return nil, err
	}
	scheme := "http://"
	if tlsConfig != nil {
		scheme = "https://"
	}
	req, err := http.NewRequest(http.MethodGet, scheme+dashboard+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	if token, err := auth.Load(); err == nil && token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s/metrics answered %s", dashboard, resp.Status)
	}
	var out []string
	scanner := bufio.NewScanner(resp.Body)
	scanner.Buffer(make([]byte, 64*1024), 1<<20)
	for scanner.Scan() {
		for _, p := range prefixes {
			if strings.HasPrefix(scanner.Text(), p) {
				out = append(out, scanner.Text())
			}
		}
	}
	sort.Strings(out)
	return out, scanner.Err()
}
