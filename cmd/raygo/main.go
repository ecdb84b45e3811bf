// Command raygo is raygo's one CLI: start and stop nodes, and look at the cluster.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// usageError is bad input: the CLI prints it in one line (or, when lines is set, one
// line per problem) and exits with status 2.
type usageError struct {
	msg   string
	lines []string
}

func (e *usageError) Error() string { return e.msg }

func badInput(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
	hidden  bool
}

func commands() []command {
	return []command{
		{name: "start", summary: "Start a head node (--head) or a node that joins a cluster (--address).", run: runStart},
		{name: "stop", summary: "Stop every raygo node that `raygo start` left running on this machine.", run: runStop},
		{name: "status", summary: "Print a summary of the cluster: nodes alive and dead, resources used and total.", run: runStatus},
		{name: "list", summary: "List cluster state: `raygo list nodes|placement-groups|actors`.", run: runList},
		{name: "queues", summary: "Queues of admission: `raygo queues list` (quotas, usage, pending), `raygo queues apply FILE`.", run: runQueues},
		{name: "up", summary: "Start a cluster from a Ray cluster YAML: the head, its autoscaler, min_workers of each node type.", run: runUp},
		{name: "down", summary: "Stop a cluster `raygo up` started: the head, then every node its autoscaler launched.", run: runDown},
		{name: "drain", summary: "Mark a node DRAINING: it takes no new work and keeps what it runs.", run: runDrain},
		{name: "auth", summary: "Scoped tokens (admin): `raygo auth issue --scope admin|node|queue:Q|namespace:NS`, `list`, `revoke ID`.", run: runAuth},
		{name: "get-auth-token", summary: "Print this machine's cluster token (--generate makes one): what clients send when auth is on.", run: runGetAuthToken},
		{name: "debug", summary: "Operator tools: `raygo debug check-invariants` (partial gangs, double allocation, leaks).", run: runDebug},
		{name: "gcs-server", summary: "Run the GCS in the foreground (started by `raygo start --head`).", run: runGCSServer, hidden: true},
		{name: "raylet", summary: "Run a raylet in the foreground (started by `raygo start`).", run: runRaylet, hidden: true},
		{name: "autoscaler", summary: "Run the autoscaler in the foreground (started by `raygo start --head --autoscaling-config`).", run: runAutoscaler, hidden: true},
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `raygo: a Ray-compatible control layer for GPU clusters.

Usage: raygo <command> [flags]

Commands:
`)
	for _, c := range commands() {
		if !c.hidden {
			fmt.Fprintf(w, "  %-14s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprint(w, `
Advanced (what start runs, for process managers):
  gcs-server  Run the GCS in the foreground.
  raylet      Run a raylet in the foreground.
  autoscaler  Run the autoscaler in the foreground.

Examples:
  raygo start --head --block                 # a head node in the foreground
  raygo start --address 127.0.0.1:6380       # join it from another shell or machine
  raygo status
  raygo list nodes --format json

Every command that talks to a cluster takes --address HOST:PORT, else RAYGO_ADDRESS,
else 127.0.0.1:6380, and sends the cluster token when this machine has one
(RAYGO_AUTH_TOKEN, RAYGO_AUTH_TOKEN_PATH, ~/.raygo/auth_token). Run
'raygo <command> --help' for its flags.
`)
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(args[1:], stdout, stderr)
		return exitCode(err, stderr)
	}
	fmt.Fprintf(stderr, "raygo: unknown command %q (run 'raygo --help' for the list)\n", args[0])
	return 2
}

// errHelp is returned after --help was printed.
var errHelp = errors.New("help printed")

func exitCode(err error, stderr io.Writer) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.As(err, &ue):
		lines := ue.lines
		if len(lines) == 0 {
			lines = []string{ue.msg}
		}
		for _, line := range lines {
			fmt.Fprintf(stderr, "raygo: %s\n", oneLine(line))
		}
		return 2
	default:
		fmt.Fprintf(stderr, "raygo: %s\n", oneLine(grpcPrefix.ReplaceAllString(err.Error(), "")))
		return 1
	}
}

// grpcPrefix is gRPC's "rpc error: code = Unauthenticated desc = " before a server's
// message, which says what is wrong on its own.
var grpcPrefix = regexp.MustCompile(`rpc error: code = \w+ desc = `)

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
