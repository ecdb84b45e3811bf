package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/raygo-dev/raygo/internal/auth"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

func runAuth(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "issue":
			return runAuthIssue(args[1:], stdout, stderr)
		case "list":
			return runAuthList(args[1:], stdout)
		case "revoke":
			return runAuthRevoke(args[1:], stdout)
		case "--help", "-h":
			fmt.Fprint(stdout, authUsage)
			return errHelp
		}
	}
	return badInput("auth: give a subcommand: issue, list or revoke (see 'raygo auth --help')")
}

const authUsage = `Usage: raygo auth issue --scope SCOPE | raygo auth list | raygo auth revoke ID

Scoped tokens: credentials narrower than the cluster token, which stays the admin one.
Every subcommand needs an admin token (scope admin) and a cluster with auth on. The GCS
keeps only each token's SHA-256, in its store: tokens survive a GCS restart (on Redis),
and a revoked token is refused (Unauthenticated) from the next call on.

  issue   make a token and print it, once: it cannot be shown again
  list    the issued tokens: id, scope, created (never a token)
  revoke  remove the token with that id

Scopes:
  admin            everything, as the cluster token
  node             register nodes, the autoscaler's service, read nodes and queues; no
                   work, and no group's, actor's or job's details
  queue:Q          a tenant: create, see and remove only groups, actors and jobs of queue Q
                   (an actor's or job's queue is the one its namespace maps to, --queues)
  namespace:NS     a tenant: the same, for namespace NS

A tenant token sees only its own groups, actors and jobs (the others are left out of
lists and answered as unknown ids); naming another queue or namespace is refused
(PermissionDenied naming the field). A tenant token also runs tasks: raylets ask the GCS
about it (and keep the answer 5 s, so a revoked token stops working there within 5 s)
and lease workers for its own jobs and groups only, which take its token, as its
actors' workers do. A raylet's 2PC takes the GCS's own credential alone (a
node-token raylet takes its own token to register its workers, nothing else). A node
token runs a worker node: RAYGO_AUTH_TOKEN=<node token> raygo start --address HEAD:6380.

Examples:
  raygo auth issue --scope queue:team-a
  raygo auth list
  raygo auth revoke 3f9c2a1b7d6e5f40
`

func runAuthIssue(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("auth issue", "Make a scoped token and print it (needs an admin token). It is shown only this once.",
		"  raygo auth issue --scope queue:team-a\n  raygo auth issue --scope namespace:research\n  raygo auth issue --scope node\n", stdout)
	address := addressFlag(fs)
	scope := fs.String("scope", "", "admin, node, queue:<queue> or namespace:<namespace> (required)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return badInput("auth issue: unexpected argument %q (see --help)", fs.Arg(0))
	}
	if *scope == "" {
		return badInput("auth issue: --scope is required: admin, node, queue:<queue> or namespace:<namespace>")
	}
	if _, err := auth.ParseScope(*scope); err != nil {
		return badInput("--scope: %v", err)
	}
	c, err := dialGCS(*address)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := callContext()
	defer cancel()
	reply, err := pb.NewAuthServiceClient(c.conn).IssueToken(ctx, &pb.IssueTokenRequest{Scope: *scope})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, reply.Token)
	fmt.Fprintf(stderr, "raygo: issued token %s with scope %s; it is not shown again (revoke: raygo auth revoke %s)\n",
		reply.Info.Id, reply.Info.Scope, reply.Info.Id)
	return nil
}

func runAuthList(args []string, stdout io.Writer) error {
	fs := newFlagSet("auth list", "List the scoped tokens issued: id, scope, created; never a token (needs an admin token).",
		"  raygo auth list\n", stdout)
	address := addressFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return badInput("auth list: unexpected argument %q (see --help)", fs.Arg(0))
	}
	c, err := dialGCS(*address)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := callContext()
	defer cancel()
	reply, err := pb.NewAuthServiceClient(c.conn).ListTokens(ctx, &pb.ListTokensRequest{})
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSCOPE\tCREATED")
	for _, t := range reply.Tokens {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Id, t.Scope, time.UnixMilli(t.CreatedTimeMs).UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

func runAuthRevoke(args []string, stdout io.Writer) error {
	fs := newFlagSet("auth revoke", "Revoke a scoped token by its id (raygo auth list); calls carrying it are refused at once (needs an admin token).",
		"  raygo auth revoke 3f9c2a1b7d6e5f40\n", stdout)
	address := addressFlag(fs)
	positional, err := parseFlagsAnywhere(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 1 {
		return badInput("auth revoke: give one token id (raygo auth list shows them)")
	}
	c, err := dialGCS(*address)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := callContext()
	defer cancel()
	if _, err := pb.NewAuthServiceClient(c.conn).RevokeToken(ctx, &pb.RevokeTokenRequest{Id: positional[0]}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "revoked token %s\n", positional[0])
	return nil
}
