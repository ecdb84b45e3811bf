// Package auth tests the cluster token on real raygo processes on loopback: with
// RAYGO_AUTH_MODE=token, the head generates a token, every endpoint (GCS, raylets,
// workers, gossip) refuses whoever lacks it, and the normal paths work with it. This
// test binary is the SDK driver and, started by the raylets, the workers.
package auth

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// Counter is the test actor.
type Counter struct{ n int }

// Add adds d and returns the sum.
func (c *Counter) Add(d int) int { c.n += d; return c.n }

func init() {
	sdk.RegisterTask("square", func(x int) int { return x * x })
	sdk.RegisterActor("Counter", func() *Counter { return &Counter{} })
}

func TestMain(m *testing.M) {
	sdk.ServeIfWorker()
	code := m.Run()
	attackedCluster.Close()
	os.Exit(code)
}

// refused checks that err is the cluster's refusal of a call without its token.
func refused(t *testing.T, what string, err error) {
	t.Helper()
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "RAYGO_AUTH_TOKEN") {
		t.Errorf("%s without the token: %v, want Unauthenticated naming RAYGO_AUTH_TOKEN", what, err)
	}
}

// The head generated the token and saved it owner-only; the CLI without it is refused
// naming the variable to set; with it, the CLI, the SDK, a task and an actor work, and
// the actor's worker refuses calls without it. The attacks are in attacks_test.go.
func TestWithAuthOnTheNormalPathsWorkWithTheTokenOnly(t *testing.T) {
	a := cluster(t)
	c, token := a.c, a.admin
	tokenFile := filepath.Join(a.home, ".raygo", "auth_token")
	info, err := os.Stat(tokenFile)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v, want a file of mode 600", tokenFile, info, err)
	}
	stdout, stderr, code := harness.Run(t, c.Bin, []string{"get-auth-token"}, "HOME="+a.home)
	if code != 0 || strings.TrimSpace(stdout) != token {
		t.Fatalf("get-auth-token: exit %d, %q %s; want the saved token", code, stdout, stderr)
	}

	// The CLI without the token is refused with the variable to set; with it, it works.
	_, stderr, code = harness.Run(t, c.Bin, []string{"status", "--address", c.GCSAddress})
	if code == 0 || !strings.Contains(stderr, "RAYGO_AUTH_TOKEN") {
		t.Fatalf("status without the token: exit %d: %s", code, stderr)
	}
	if stdout, stderr, code := harness.Run(t, c.Bin, []string{"status", "--address", c.GCSAddress}, "RAYGO_AUTH_TOKEN="+token); code != 0 {
		t.Fatalf("status with the token: exit %d: %s %s", code, stdout, stderr)
	}

	// With the token: a group, a task and an actor, whose workers require it too.
	ctx := attackContext(t)
	client, pg := spreadGroup(t, ctx, c.GCSAddress, token, "a group with the token")
	t.Cleanup(func() { _ = pg.Remove(context.Background()) })
	runTask(t, ctx, client, pg, 0, "a task with the token")
	counter := callActor(t, ctx, client, pg, 1, "an actor call with the token")
	actor, err := counter.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("RAYGO_AUTH_TOKEN", "") // "no token" presents none
	for _, w := range a.attackers() {
		_, err = pb.NewCoreWorkerServiceClient(w.dial(t, actor.Address, 0)).PushTask(ctx, &pb.PushTaskRequest{ActorId: actor.ID, FunctionName: "Add"})
		refused(t, "PushTask to an actor's worker with "+w.name, err)
	}
	a.unchanged(t, ctx)
}

// spreadGroup connects the SDK with token and makes a ready STRICT_SPREAD group of two
// one-CPU bundles: one on each of two nodes.
func spreadGroup(t *testing.T, ctx context.Context, address, token, what string) (*sdk.Client, *sdk.PlacementGroup) {
	t.Helper()
	t.Setenv("RAYGO_AUTH_TOKEN", token)
	client, err := sdk.Connect(ctx, sdk.Options{Address: address})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	pg, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}, {"CPU": 1}}, sdk.StrictSpread)
	if err == nil {
		_, err = pg.Ready(ctx)
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return client, pg
}

// runTask runs square(3) in the group's bundle and checks it returns 9.
func runTask(t *testing.T, ctx context.Context, client *sdk.Client, pg *sdk.PlacementGroup, bundle int, what string) {
	t.Helper()
	var nine int
	ref, err := client.Submit(ctx, "square", sdk.Args(3), sdk.InPlacementGroup(pg, bundle))
	if err == nil {
		err = sdk.Get(ctx, ref, &nine)
	}
	if err != nil || nine != 9 {
		t.Fatalf("%s: %d %v", what, nine, err)
	}
}

// callActor creates a Counter in the group's bundle, checks a call of Add returns 1, and
// returns the actor.
func callActor(t *testing.T, ctx context.Context, client *sdk.Client, pg *sdk.PlacementGroup, bundle int, what string) *sdk.Actor {
	t.Helper()
	counter, err := client.CreateActor(ctx, "Counter", nil, sdk.InPlacementGroup(pg, bundle))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var one int
	ref, err := counter.Call(ctx, "Add", 1)
	if err == nil {
		err = sdk.Get(ctx, ref, &one)
	}
	if err != nil || one != 1 {
		t.Fatalf("%s: %d %v", what, one, err)
	}
	return counter
}
