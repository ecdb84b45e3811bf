package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"

	"github.com/raygo-dev/raygo/internal/stateapi"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

func runQueues(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "list":
			return runQueuesList(args[1:], stdout)
		case "apply":
			return runQueuesApply(args[1:], stdout)
		case "--help", "-h":
			fmt.Fprint(stdout, queuesUsage)
			return errHelp
		}
	}
	return badInput("queues: give a subcommand: list or apply (see 'raygo queues --help')")
}

const queuesUsage = `Usage: raygo queues list [--format table|json] | raygo queues apply FILE

The queues of admission (a head started with --queues FILE): quotas, usage, borrowing and
lending per resource, and the placement groups and actors waiting for admission.

  list    one line per queue and resource: nominal quota, borrowing limit, usage,
          borrowed (above nominal), lent (its part of what the cohort borrows), pending
          groups and held actors, and the fair-sharing dominant share
  apply   validate FILE whole (an error names the field, the running configuration stays)
          and make it the running one; it is saved in the store and survives a GCS
          restart. Lowering a quota below usage evicts nothing.

Token (with auth on): list: any scope; apply: admin (raygo auth --help).

Examples:
  raygo queues list
  raygo queues list --format json
  raygo queues apply queues.yaml
`

func runQueuesList(args []string, stdout io.Writer) error {
	fs := newFlagSet("queues list", "List the queues of admission: quotas, usage, borrowing, lending and pending groups and actors.",
		"  raygo queues list\n  raygo queues list --format json\n", stdout)
	address := addressFlag(fs)
	format := fs.String("format", "table", "table or json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *format != "table" && *format != "json" {
		return badInput("--format %q: must be table or json", *format)
	}
	c, err := dialGCS(*address)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := callContext()
	defer cancel()
	reply, err := pb.NewQueueServiceClient(c.conn).ListQueues(ctx, &pb.ListQueuesRequest{})
	if err != nil {
		return err
	}
	if !reply.Enabled {
		return badInput("queues list: the cluster runs without queues (start the head with --queues FILE)")
	}
	if *format == "json" {
		out := make([]stateapi.Queue, len(reply.Queues))
		for i, q := range reply.Queues {
			out[i] = stateapi.FromQueue(q)
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	return printQueueTable(stdout, reply.Queues)
}

// printQueueTable prints the queues as `raygo queues list` does: one row per queue and
// resource.
func printQueueTable(w io.Writer, queues []*pb.QueueStatus) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tCOHORT\tRESOURCE\tNOMINAL\tBORROWING LIMIT\tUSAGE\tBORROWED\tLENT\tPENDING\tSHARE")
	for _, q := range queues {
		cohort := q.Cohort
		if cohort == "" {
			cohort = "-"
		}
		if len(q.Resources) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\t-\t%d\t%.2f\n", q.Queue, cohort, q.Pending, q.DominantShare)
		}
		for _, r := range q.Resources {
			nominal, limit := "-", "-"
			if r.Limited {
				nominal, limit = formatAmount(r.NominalQuota), "unlimited"
				if r.BorrowingLimit >= 0 {
					limit = formatAmount(r.BorrowingLimit)
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%.2f\n", q.Queue, cohort, r.Resource, nominal, limit,
				formatAmount(r.Usage), formatAmount(r.Borrowed), formatAmount(r.Lent), q.Pending, q.DominantShare)
		}
	}
	return tw.Flush()
}

func runQueuesApply(args []string, stdout io.Writer) error {
	fs := newFlagSet("queues apply", "Validate a queue configuration whole and make it the running one (saved in the store).",
		"  raygo queues apply queues.yaml\n", stdout)
	address := addressFlag(fs)
	var positional []string
	for len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		positional, args = append(positional, args[0]), args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	positional = append(positional, fs.Args()...)
	if len(positional) != 1 {
		return badInput("queues apply: give exactly one FILE (see 'raygo queues apply --help')")
	}
	data, err := os.ReadFile(positional[0])
	if err != nil {
		return badInput("queues apply: %v", err)
	}
	if _, err := loadQueues(positional[0]); err != nil {
		return err
	}
	c, err := dialGCS(*address)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := callContext()
	defer cancel()
	if _, err := pb.NewQueueServiceClient(c.conn).ApplyQueues(ctx, &pb.ApplyQueuesRequest{ConfigYaml: data}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "applied %s (%s bytes)\n", positional[0], strconv.Itoa(len(data)))
	return nil
}
