package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/raygo-dev/raygo/internal/invariants"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

func runDebug(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "check-invariants" {
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-h") {
			fmt.Fprint(stdout, debugUsage)
			return errHelp
		}
		return badInput("debug: give a subcommand: check-invariants (see 'raygo debug --help')")
	}
	return runCheckInvariants(args[1:], stdout)
}

const debugUsage = `Usage: raygo debug check-invariants [flags]

Tools for operators investigating a cluster.

Example:
  raygo debug check-invariants
  raygo debug check-invariants --views 5 --interval 2s
`

func runCheckInvariants(args []string, stdout io.Writer) error {
	fs := newFlagSet("debug check-invariants", "Read the GCS's placement-group table and what every live raylet holds, and report any\n"+
		"partial gang, double allocation, leaked reservation or lost bundle, and, when the GCS runs\n"+
		"queues, any queue or cohort whose groups hold more than its quota. A group being placed or\n"+
		"removed can look wrong for an instant, so the view is taken --views times, --interval apart,\n"+
		"and only what every view shows is reported. Exit status 1 when something is reported.",
		"  raygo debug check-invariants\n  raygo debug check-invariants --views 5 --interval 2s\n", stdout)
	address := addressFlag(fs)
	views := fs.Int("views", 3, "how many views to take (at least 1)")
	interval := fs.Duration("interval", time.Second, "time between two views")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *views < 1 {
		return badInput("--views %d: must be at least 1", *views)
	}
	if *interval < 0 {
		return badInput("--interval %s: must not be negative", *interval)
	}
	c, err := dialGCS(*address)
	if err != nil {
		return err
	}
	defer c.Close()
	var found [][]invariants.Violation
	for i := range *views {
		if i > 0 {
			time.Sleep(*interval)
		}
		view, err := takeView(c)
		if err != nil {
			return err
		}
		found = append(found, view)
	}
	settled := invariants.Settled(found...)
	if len(settled) == 0 {
		fmt.Fprintf(stdout, "No invariant broken (%d views, %s apart).\n", *views, *interval)
		return nil
	}
	for _, v := range settled {
		fmt.Fprintln(stdout, v)
	}
	return fmt.Errorf("%d invariant violations in every one of %d views", len(settled), *views)
}

// takeView reads the table, then each live raylet's holdings, and checks them.
func takeView(c *gcsClient) ([]invariants.Violation, error) {
	ctx, cancel := callContext()
	defer cancel()
	groups, err := c.pgs.GetAllPlacementGroup(ctx, &pb.GetAllPlacementGroupRequest{})
	if err != nil {
		return nil, fmt.Errorf("read the placement-group table: %w", err)
	}
	nodes, err := c.nodes.GetAllNodeInfo(ctx, &pb.GetAllNodeInfoRequest{AliveOnly: true})
	if err != nil {
		return nil, fmt.Errorf("read the node table: %w", err)
	}
	var view []invariants.Node
	for _, n := range nodes.Nodes {
		stats, err := rayletStats(ctx, n.RayletAddress)
		if err != nil {
			// A raylet that does not answer is checked as dead: what it holds is unknown.
			view = append(view, invariants.Node{ID: n.NodeId})
			continue
		}
		view = append(view, invariants.Node{ID: n.NodeId, Alive: true, Total: n.ResourcesTotal, Bundles: stats.Bundles})
	}
	found := invariants.Check(groups.PlacementGroups, view)
	queues, err := pb.NewQueueServiceClient(c.conn).ListQueues(ctx, &pb.ListQueuesRequest{})
	if err != nil {
		return nil, fmt.Errorf("read the queues: %w", err)
	}
	if queues.Enabled {
		actors, err := pb.NewActorInfoServiceClient(c.conn).GetAllActorInfo(ctx, &pb.GetAllActorInfoRequest{})
		if err != nil {
			return nil, fmt.Errorf("read the actor table: %w", err)
		}
		found = append(found, invariants.CheckQuotas(groups.PlacementGroups, actors.Actors, queues.Queues)...)
	}
	return found, nil
}

func rayletStats(ctx context.Context, address string) (*pb.GetNodeStatsReply, error) {
	conn, err := rpcutil.Dial(address, rpcutil.DialOptions{})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return pb.NewNodeManagerServiceClient(conn).GetNodeStats(ctx, &pb.GetNodeStatsRequest{})
}
