package actorstasks

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// team's queue holds 2 GPUs and belongs to no cohort: nothing to borrow.
const teamGPUQueue = `queues:
  - name: team
    namespaces: ["team"]
    resources:
      GPU: {nominalQuota: 2}
`

// With queues, actors and tasks outside placement groups are charged to the queue their
// job's namespace maps to: on a node with 8 GPUs free, a third 1-GPU actor of a queue
// with 2 GPUs waits with QuotaExceeded (in raygo list actors and the metrics) and starts
// once one of the first two is killed; a 1-GPU task waits likewise (the GCS's lease
// decision says QuotaExceeded) and runs once the other actor is killed; raygo queues list
// counts the actors' and the task's charges, which are returned as they end; the
// invariant checker counts the actors.
func TestQueuesChargeActorsAndTasksOutsideGroups(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "queues.yaml")
	if err := os.WriteFile(file, []byte(teamGPUQueue), 0o644); err != nil {
		t.Fatal(err)
	}
	c := harness.StartHead(t, "--num-cpus", "2", "--queues", file, "--dashboard-port", "0")
	c.AddNode("--gpu-sim", "dgx-h100", "--num-cpus", "8")
	ctx := testContext(t)
	client, err := sdk.Connect(ctx, sdk.Options{Address: c.GCSAddress, Namespace: "team"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })

	// team reads team's GPU usage and pending count from raygo queues list.
	team := func() (usage float64, pending int, err error) {
		stdout, stderr, code := c.Run("queues", "list", "--format", "json")
		if code != 0 {
			return 0, 0, fmt.Errorf("queues list: exit %d: %s", code, stderr)
		}
		var listed []struct {
			Queue     string `json:"queue"`
			Pending   int    `json:"pending"`
			Resources []struct {
				Resource string  `json:"resource"`
				Usage    float64 `json:"usage"`
			} `json:"resources"`
		}
		if err := json.Unmarshal([]byte(stdout), &listed); err != nil {
			return 0, 0, fmt.Errorf("%v: %s", err, stdout)
		}
		for _, q := range listed {
			if q.Queue != "team" {
				continue
			}
			pending = q.Pending
			for _, r := range q.Resources {
				if r.Resource == "GPU" {
					usage = r.Usage
				}
			}
		}
		return usage, pending, nil
	}
	wantTeam := func(what string, wantUsage float64, wantPending int) {
		t.Helper()
		harness.Eventually(t, 30*time.Second, what, func() error {
			usage, pending, err := team()
			if err != nil {
				return err
			}
			if usage != wantUsage || pending != wantPending {
				return fmt.Errorf("team uses %g GPUs with %d pending, want %g with %d", usage, pending, wantUsage, wantPending)
			}
			return nil
		})
	}
	wantUsage := func(what string, want float64) {
		t.Helper()
		wantTeam(what, want, 0)
	}
	invariantsHold := func(when string) {
		t.Helper()
		if stdout, stderr, code := c.Run("debug", "check-invariants", "--views", "1"); code != 0 {
			t.Fatalf("check-invariants %s: exit %d: %s%s", when, code, stdout, stderr)
		}
	}

	var actors []*sdk.Actor
	for range 3 {
		a, err := client.CreateActor(ctx, "Counter", sdk.Args(0), sdk.WithGPUs(1))
		if err != nil {
			t.Fatal(err)
		}
		actors = append(actors, a)
	}
	// The first two are admitted in creation order; the third waits for quota although
	// six GPUs are free.
	for _, a := range actors[:2] {
		if _, err := a.Ready(ctx); err != nil {
			t.Fatal(err)
		}
	}
	harness.Eventually(t, 30*time.Second, "the third actor waits for its queue's quota", func() error {
		out, stderr, code := c.Run("list", "actors", "--format", "json")
		if code != 0 {
			return fmt.Errorf("list actors: exit %d: %s", code, stderr)
		}
		row := findActorRow(t, out, actors[2].ID)
		if row["state"] != "PENDING_CREATION" || row["pending_reason_code"] != "QuotaExceeded" || !strings.Contains(fmt.Sprint(row["pending_reason"]), `queue "team"`) {
			return fmt.Errorf("third actor's row: %v", row)
		}
		return nil
	})
	for _, a := range actors[:2] {
		row := actorRow(t, c, a.ID)
		if row["queue"] != "team" || row["state"] != "ALIVE" {
			t.Errorf("an admitted actor's row: %v, want ALIVE charged to team", row)
		}
	}
	if status, stderr, code := c.Run("status"); code != 0 || !strings.Contains(status, "actor_"+actors[2].ID[:8]) || !strings.Contains(status, `QuotaExceeded in queue "team"`) {
		t.Errorf("raygo status (exit %d, %s) does not show the third actor waiting with QuotaExceeded:\n%s", code, stderr, status)
	}
	metrics := get(t, c.DashboardAddress(t, ""), "/metrics")
	if !strings.Contains(metrics, `raygo_pending_actors{reason="QuotaExceeded"} 1`) {
		t.Errorf("metrics lack one actor pending with QuotaExceeded:\n%s", grepLines(metrics, "raygo_pending_actors"))
	}
	if !strings.Contains(metrics, `raygo_queue_pending_workloads{queue="team"} 1`) {
		t.Errorf("metrics lack team's one pending workload (the held actor):\n%s", grepLines(metrics, "raygo_queue_pending_workloads"))
	}
	wantTeam("the two actors charged, the third pending", 2, 1)
	invariantsHold("with two charged actors")

	// Killing one returns its charge: the third starts.
	if err := actors[0].Kill(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := actors[2].Ready(ctx); err != nil {
		t.Fatalf("the third actor once the first was killed: %v", err)
	}
	wantUsage("the second and third actors charged", 2)

	// A 1-GPU task of the job waits likewise: the GCS holds its lease back.
	conn, err := rpcutil.Dial(c.GCSAddress, rpcutil.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	probe, err := pb.NewActorInfoServiceClient(conn).ChooseLeaseTargets(ctx, &pb.ChooseLeaseTargetsRequest{
		RequestId: "probe", Resources: map[string]float64{"GPU": 1}, JobId: client.JobID(), ChargeId: "probe"})
	if err != nil {
		t.Fatal(err)
	}
	if probe.PendingReasonCode != "QuotaExceeded" || probe.Charged || len(probe.Targets) != 0 {
		t.Fatalf("a 1-GPU lease of team at 2 of 2 GPUs: %v, want held with QuotaExceeded", probe)
	}
	task, err := client.Submit(ctx, "where", nil, sdk.WithGPUs(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := actors[1].Kill(ctx, true); err != nil {
		t.Fatal(err)
	}
	var where WorkerView
	if err := sdk.Get(ctx, task, &where); err != nil {
		t.Fatalf("the task once the second actor was killed: %v", err)
	}
	if where.CUDAVisibleDevices == "" {
		t.Errorf("the 1-GPU task saw no GPU")
	}
	// The task's worker is returned (its lease ends): only the third actor is charged.
	wantUsage("the task's charge returned", 1)
	invariantsHold("after the task")
}

func actorRow(t *testing.T, c *harness.Cluster, id string) map[string]any {
	t.Helper()
	out, stderr, code := c.Run("list", "actors", "--format", "json")
	if code != 0 {
		t.Fatalf("list actors: exit %d: %s", code, stderr)
	}
	return findActorRow(t, out, id)
}

func get(t *testing.T, address, path string) string {
	t.Helper()
	url := address + path
	resp, err := harness.HTTPGet(address, path) // HTTPS under scripts/test-tls.sh
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	return string(body)
}

func grepLines(text, substring string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, substring) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
