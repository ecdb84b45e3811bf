package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/testutil/poll"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

const teamQueues = `queues:
  - name: team
    namespaces: ["team"]
    resources:
      CPU: {nominalQuota: 2}
`

// A head started with --queues admits groups into their namespace's queue: two 1-CPU
// groups fill team's quota of 2 CPUs, a third waits with QuotaExceeded although the
// node has CPUs free, and is placed once one of the others is removed.
func TestQueuesHoldGroupsBeyondTheirQuota(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "queues.yaml")
	if err := os.WriteFile(file, []byte(teamQueues), 0o644); err != nil {
		t.Fatal(err)
	}
	c := harness.StartHead(t, "--num-cpus", "8", "--queues", file)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := sdk.Connect(ctx, sdk.Options{Address: c.GCSAddress, Namespace: "team"})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var groups []*sdk.PlacementGroup
	for range 3 {
		pg, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}}, sdk.Pack)
		if err != nil {
			t.Fatal(err)
		}
		groups = append(groups, pg)
	}
	for _, pg := range groups[:2] {
		if _, err := pg.Ready(ctx); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 10*time.Second, 20*time.Millisecond, "the third group waits for quota", func() error {
		info, err := groups[2].Table(ctx)
		if err != nil {
			return err
		}
		if info.State != "PENDING" || info.PendingReasonCode != "QuotaExceeded" || info.Queue != "team" || info.SchedulingState != "QUEUED" {
			return fmt.Errorf("%s %s queue %q %s", info.State, info.PendingReasonCode, info.Queue, info.SchedulingState)
		}
		return nil
	})
	// raygo queues list shows the usage and the waiting group.
	out, err := exec.Command(c.Bin, "queues", "list", "--format", "json", "--address", c.GCSAddress).CombinedOutput()
	if err != nil {
		t.Fatalf("queues list: %v: %s", err, out)
	}
	var listed []struct {
		Queue     string `json:"queue"`
		Pending   int    `json:"pending"`
		Resources []struct {
			Resource     string  `json:"resource"`
			NominalQuota float64 `json:"nominal_quota"`
			Usage        float64 `json:"usage"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(out, &listed); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var team []string
	for _, q := range listed {
		if q.Queue == "team" {
			team = append(team, fmt.Sprint(q.Pending))
			for _, r := range q.Resources {
				team = append(team, fmt.Sprintf("%s %g/%g", r.Resource, r.Usage, r.NominalQuota))
			}
		}
	}
	if got := strings.Join(team, ", "); got != "1, CPU 2/2" {
		t.Fatalf("queues list for team: %q, want 1 pending and CPU 2/2:\n%s", got, out)
	}

	// raygo queues apply raises the quota: the third group is admitted without a removal.
	if err := os.WriteFile(file, []byte(strings.Replace(teamQueues, "nominalQuota: 2", "nominalQuota: 3", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(c.Bin, "queues", "apply", file, "--address", c.GCSAddress).CombinedOutput(); err != nil {
		t.Fatalf("queues apply: %v: %s", err, out)
	}
	if _, err := groups[2].Ready(ctx); err != nil {
		t.Fatalf("the third group after the quota was raised: %v", err)
	}
	// A bad configuration is refused whole, naming the field; the running one stays.
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(teamQueues+"    unknownField: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(c.Bin, "queues", "apply", bad, "--address", c.GCSAddress).CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 2 || !strings.Contains(string(out), "unknownField") {
		t.Fatalf("bad apply: %v: %s", err, out)
	}
	// A fourth group waits again (3 of 3 CPUs charged), and a removal lets it in.
	fourth, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}}, sdk.Pack)
	if err != nil {
		t.Fatal(err)
	}
	if err := groups[0].Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := fourth.Ready(ctx); err != nil {
		t.Fatalf("the fourth group after a removal returned quota: %v", err)
	}
	// The invariant checker counts each queue's groups from the table: 3 of 3 CPUs is
	// within quota; a quota lowered below usage (which evicts nothing) is an overrun.
	check := func() (string, int) {
		stdout, stderr, code := c.Run("debug", "check-invariants", "--views", "1")
		return stdout + stderr, code
	}
	if out, code := check(); code != 0 {
		t.Fatalf("check-invariants at 3 of 3 CPUs: exit %d: %s", code, out)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(teamQueues, "nominalQuota: 2", "nominalQuota: 1", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(c.Bin, "queues", "apply", file, "--address", c.GCSAddress).CombinedOutput(); err != nil {
		t.Fatalf("queues apply: %v: %s", err, out)
	}
	if out, code := check(); code != 1 || !strings.Contains(out, "quota_overrun: queue team holds 3 CPU, its limit is 1") {
		t.Fatalf("check-invariants with team's quota lowered to 1 CPU: exit %d: %s", code, out)
	}
}

// A bad queue file stops the start before anything runs, naming the field.
func TestABadQueueFileStopsTheStart(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "queues.yaml")
	bad := strings.Replace(teamQueues, "nominalQuota: 2", "nominalQuota: -2", 1)
	if err := os.WriteFile(file, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(harness.Binary(t), "start", "--head", "--port", "1", "--queues", file).CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 2 || !strings.Contains(string(out), "nominalQuota") {
		t.Fatalf("%v: %s", err, out)
	}
}

// The issue's cohort scenario on real processes: 3 simulated DGX H100 nodes (24 GPUs) and
// the issue's configuration. research submits 4 × {GPU: 1} PACK groups at training: four
// run (16 GPUs, 8 borrowed from prod's idle quota), the fifth waits with QuotaExceeded;
// prod gets the 8 GPUs left, and as research's groups finish, up to its 16, ahead of
// research's waiting group (a queue below its nominal quota goes first).
func TestTheIssueCohortScenarioOnRealProcesses(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t, "--num-cpus", "4", "--queues", "../../admission/queues/testdata/issue-example.yaml")
	for range 3 {
		c.AddNode("--gpu-sim", "dgx-h100")
	}
	pgs := harness.DialPlacementGroups(t, c.GCSAddress)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	create := func(namespace, priority string) string {
		t.Helper()
		req := &pb.CreatePlacementGroupRequest{Strategy: "PACK", Lifetime: "detached", Namespace: namespace, Priority: priority}
		for range 4 {
			req.Bundles = append(req.Bundles, &pb.CreatePlacementGroupRequest_BundleSpec{Resources: map[string]float64{"GPU": 1}})
		}
		reply, err := pgs.CreatePlacementGroup(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return reply.PlacementGroup.PlacementGroupId
	}
	state := func(id string) *pb.PlacementGroupInfo {
		reply, err := pgs.GetPlacementGroup(ctx, &pb.GetPlacementGroupRequest{PlacementGroupId: id})
		if err != nil {
			t.Fatal(err)
		}
		return reply.PlacementGroup
	}
	expect := func(what string, ids []string, wantState pb.PlacementGroupState, wantReason string) {
		t.Helper()
		harness.Eventually(t, 30*time.Second, what, func() error {
			for _, id := range ids {
				if g := state(id); g.State != wantState || wantReason != "" && g.PendingReasonCode != wantReason {
					return fmt.Errorf("group %s: %v %q", id[:8], g.State, g.PendingReasonCode)
				}
			}
			return nil
		})
	}
	var research []string
	for range 5 {
		research = append(research, create("research", "training"))
	}
	expect("research's four groups run (8 GPUs borrowed)", research[:4], pb.PlacementGroupState_CREATED, "")
	expect("research's fifth waits for quota", research[4:], pb.PlacementGroupState_PENDING, "QuotaExceeded")
	var prod []string
	for range 4 {
		prod = append(prod, create("prod", ""))
	}
	expect("prod gets the 8 GPUs left", prod[:2], pb.PlacementGroupState_CREATED, "")
	expect("prod's others wait", prod[2:], pb.PlacementGroupState_PENDING, "")
	for _, id := range research[:2] {
		if _, err := pgs.RemovePlacementGroup(ctx, &pb.RemovePlacementGroupRequest{PlacementGroupId: id}); err != nil {
			t.Fatal(err)
		}
	}
	expect("prod up to its 16 as research's finish", prod, pb.PlacementGroupState_CREATED, "")
	expect("research's fifth still waits", research[4:], pb.PlacementGroupState_PENDING, "")
	stdout, stderr, code := c.Run("queues", "list", "--format", "json")
	if code != 0 {
		t.Fatalf("queues list: %d %s", code, stderr)
	}
	var listed []struct {
		Queue     string `json:"queue"`
		Resources []struct {
			Resource string  `json:"resource"`
			Usage    float64 `json:"usage"`
			Borrowed float64 `json:"borrowed"`
		} `json:"resources"`
	}
	if err := json.Unmarshal([]byte(stdout), &listed); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	var gpus []string
	for _, q := range listed {
		for _, r := range q.Resources {
			if r.Resource == "GPU" {
				gpus = append(gpus, fmt.Sprintf("%s %g (borrowed %g)", q.Queue, r.Usage, r.Borrowed))
			}
		}
	}
	if got := strings.Join(gpus, ", "); got != "prod 16 (borrowed 0), research 8 (borrowed 0)" {
		t.Fatalf("GPU usage by queue: %s", got)
	}
}
