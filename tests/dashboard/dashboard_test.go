// Package dashboard tests the head's dashboard port end to end: Ray's state API paths
// with a plain HTTP client, the web page in headless Chromium (it renders the cluster
// and shows a new placement group without a reload), and that with auth on nothing
// answers without the cluster token.
package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/raylet/gpu/gpusim"
	"github.com/raygo-dev/raygo/tests/harness"
)

// listReply is Ray's envelope around a ListApiResponse, decoded loosely enough to see
// every field Ray's client reads.
type listReply struct {
	Result bool   `json:"result"`
	Msg    string `json:"msg"`
	Data   struct {
		Result *struct {
			Total                 *int              `json:"total"`
			NumAfterTruncation    *int              `json:"num_after_truncation"`
			NumFiltered           *int              `json:"num_filtered"`
			PartialFailureWarning *string           `json:"partial_failure_warning"`
			Result                []json.RawMessage `json:"result"`
		} `json:"result"`
	} `json:"data"`
}

// get fetches path from the dashboard with headers; it returns the status and body.
func get(t *testing.T, base, path string, headers ...string) (int, []byte, *http.Response) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body, resp
}

func list(t *testing.T, base, path string, headers ...string) listReply {
	t.Helper()
	code, body, _ := get(t, base, path, headers...)
	var reply listReply
	if err := json.Unmarshal(body, &reply); err != nil {
		t.Fatalf("GET %s: %d %s: %v", path, code, body, err)
	}
	if code != http.StatusOK || !reply.Result || reply.Data.Result == nil {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	return reply
}

// startCluster starts a head serving the dashboard (with one queue) and one simulated
// DGX H100 whose GPU 7 is in MIG mode, sampling its GPUs' activity every 200ms; it
// returns the cluster and the dashboard's host:port once both nodes are listed. With
// authHome set, auth is on with HOME=authHome, and the cluster token is returned too.
// The head picks its dashboard port (harness.Cluster.DashboardAddress).
func startCluster(t *testing.T, authHome string) (c *harness.Cluster, dashboard, token string) {
	t.Helper()
	queues := filepath.Join(t.TempDir(), "queues.yaml")
	if err := os.WriteFile(queues, []byte("queues:\n  - name: everyone\n    namespaces: [\"*\"]\n    resources:\n      GPU: {nominalQuota: 6}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var env []string
	if authHome != "" {
		env = []string{"HOME=" + authHome, "RAYGO_AUTH_MODE=token"}
	}
	c = harness.StartHeadWithEnv(t, env, "--num-cpus", "4", "--dashboard-port", "0", "--queues", queues)
	c.AddNode("--gpu-sim", "dgx-h100", "--mig", "7:on", "--gpu-activity-interval", "200ms")
	if authHome != "" {
		token = harness.HeadToken(t, authHome)
	}
	return c, c.DashboardAddress(t, token), token
}

// gpus is a bundle of n whole GPUs.
func gpus(n float64) map[string]float64 { return map[string]float64{"GPU": n} }

func createGroup(t *testing.T, c *harness.Cluster, name, strategy string, bundles ...map[string]float64) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := &pb.CreatePlacementGroupRequest{Name: name, Strategy: strategy, Lifetime: "detached"}
	for _, resources := range bundles {
		req.Bundles = append(req.Bundles, &pb.CreatePlacementGroupRequest_BundleSpec{Resources: resources})
	}
	reply, err := harness.DialPlacementGroups(t, c.GCSAddress).CreatePlacementGroup(ctx, req)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return reply.PlacementGroup.PlacementGroupId
}

func TestDashboard(t *testing.T) {
	t.Parallel()
	c, dashboard, _ := startCluster(t, "")
	harness.Eventually(t, 30*time.Second, "both nodes listed", func() error {
		if got := list(t, dashboard, "/api/v0/nodes"); *got.Data.Result.Total != 2 {
			return fmt.Errorf("%d nodes", *got.Data.Result.Total)
		}
		return nil
	})

	t.Run("StateAPIEnvelope", func(t *testing.T) { testStateAPIEnvelope(t, c, dashboard) })
	t.Run("PagesLive", func(t *testing.T) { testPagesLive(t, c, dashboard) })
}

// The state API answers in Ray's envelope with Ray's fields, honours limit and
// filters, and refuses a bad query with result false and the reason in msg.
func testStateAPIEnvelope(t *testing.T, c *harness.Cluster, dashboard string) {
	// Ray's columns without detail and with detail=true, nothing else (Ray's client
	// refuses a column it does not know); raygo's whole rows with detail=all.
	for query, want := range map[string][]string{
		"":             {"is_head_node", "labels", "node_id", "node_ip", "node_name", "resources_total", "state", "state_message"},
		"?detail=true": {"end_time_ms", "is_head_node", "labels", "node_id", "node_ip", "node_name", "resources_total", "start_time_ms", "state", "state_message"},
	} {
		for _, raw := range list(t, dashboard, "/api/v0/nodes"+query).Data.Result.Result {
			var row map[string]any
			if err := json.Unmarshal(raw, &row); err != nil {
				t.Fatal(err)
			}
			if got := slices.Sorted(maps.Keys(row)); !slices.Equal(got, want) {
				t.Errorf("/api/v0/nodes%s: columns %v, want %v", query, got, want)
			}
		}
	}
	nodes := list(t, dashboard, "/api/v0/nodes?detail=all")
	r := nodes.Data.Result
	if nodes.Msg != "" || *r.Total != 2 || *r.NumAfterTruncation != 2 || *r.NumFiltered != 2 || len(r.Result) != 2 || r.PartialFailureWarning == nil {
		t.Fatalf("nodes: %+v", nodes)
	}
	var node map[string]any
	for _, raw := range r.Result {
		if err := json.Unmarshal(raw, &node); err != nil {
			t.Fatal(err)
		}
		if node["is_head_node"] == false {
			break
		}
	}
	// Ray's NodeState fields, and raygo's GPUs.
	for _, field := range []string{"node_id", "node_ip", "is_head_node", "state", "node_name", "resources_total", "labels", "start_time_ms", "gpus", "mig_gpus"} {
		if _, ok := node[field]; !ok {
			t.Errorf("node row has no %s: %v", field, node)
		}
	}
	whole, _ := node["gpus"].([]any)
	mig, _ := node["mig_gpus"].([]any)
	if len(whole) != 7 || len(mig) != 1 {
		t.Errorf("the DGX H100 lists %d whole GPUs and %d in MIG mode, want 7 and 1", len(whole), len(mig))
	}

	if got := list(t, dashboard, "/api/v0/nodes?limit=1").Data.Result; *got.Total != 2 || *got.NumFiltered != 2 || len(got.Result) != 1 {
		t.Errorf("limit=1: total %d, filtered %d, %d rows; want 2, 2, 1", *got.Total, *got.NumFiltered, len(got.Result))
	}
	if got := list(t, dashboard, "/api/v0/nodes?filter_keys=is_head_node&filter_predicates=%3D&filter_values=true").Data.Result; *got.NumFiltered != 1 || len(got.Result) != 1 {
		t.Errorf("is_head_node=true: filtered %d, %d rows; want 1, 1", *got.NumFiltered, len(got.Result))
	}

	group := createGroup(t, c, "envelope", "PACK", gpus(1))
	groups := list(t, dashboard, "/api/v0/placement_groups?detail=all&filter_keys=placement_group_id&filter_predicates=%3D&filter_values="+group).Data.Result
	var row map[string]any
	if len(groups.Result) != 1 || json.Unmarshal(groups.Result[0], &row) != nil {
		t.Fatalf("placement group %s: %d rows", group, len(groups.Result))
	}
	for _, field := range []string{"placement_group_id", "name", "creator_job_id", "state", "strategy", "is_detached", "bundles", "stats", "queue"} {
		if _, ok := row[field]; !ok {
			t.Errorf("placement group row has no %s: %v", field, row)
		}
	}
	if actors := list(t, dashboard, "/api/v0/actors").Data.Result; *actors.Total != 0 || len(actors.Result) != 0 {
		t.Errorf("actors: %d, want none", *actors.Total)
	}
	// A driver's job, RUNNING.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	job, err := harness.Dial(t, c.GCSAddress).Jobs.AddJob(ctx, &pb.AddJobRequest{Namespace: "dash", DriverIp: "127.0.0.1", DriverPid: 42, Entrypoint: "train.py"})
	if err != nil {
		t.Fatal(err)
	}
	jobs := list(t, dashboard, "/api/v0/jobs?detail=all&filter_keys=job_id&filter_predicates=%3D&filter_values="+job.Job.JobId).Data.Result
	var jobRow map[string]any
	if len(jobs.Result) != 1 || json.Unmarshal(jobs.Result[0], &jobRow) != nil || jobRow["status"] != "RUNNING" || jobRow["entrypoint"] != "train.py" || jobRow["namespace"] != "dash" {
		t.Errorf("job %s: %d rows, %v", job.Job.JobId, len(jobs.Result), jobRow)
	}

	code, body, _ := get(t, dashboard, "/api/v0/cluster_status")
	var status struct {
		Result bool `json:"result"`
		Data   struct {
			Result struct {
				ClusterResourceState struct {
					NodeStates []map[string]any `json:"node_states"`
				} `json:"cluster_resource_state"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &status); err != nil || code != http.StatusOK || !status.Result || len(status.Data.Result.ClusterResourceState.NodeStates) != 2 {
		t.Errorf("cluster_status: %d %s (%v)", code, body, err)
	}

	for path, want := range map[string]string{
		"/api/v0/nodes?limit=10001": "exceeds the supported limit 10000",
		"/api/v0/nodes?detail=yes":  "must be true, false or all",
		"/api/v0/actors?filter_keys=nope&filter_predicates=%3D&filter_values=1": "filter column nope is not supported",
	} {
		code, body, _ := get(t, dashboard, path)
		var reply listReply
		if err := json.Unmarshal(body, &reply); err != nil || code != http.StatusBadRequest || reply.Result || !strings.Contains(reply.Msg, want) {
			t.Errorf("GET %s: %d %s, want 400 with result false and %q", path, code, body, want)
		}
	}
}

// The page renders every section from the live API, shows a group created after it
// loaded within seconds (no reload), colours the GPUs the group holds, lists a
// waiting group with its reason code, and throws nothing.
func testPagesLive(t *testing.T, c *harness.Cluster, dashboard string) {
	b := startBrowser(t)
	b.do("open the dashboard", chromedp.Navigate("http://"+dashboard+"/"))
	b.waitFor(15*time.Second, "two nodes and 8 GPUs drawn (one in MIG mode)", `document.querySelectorAll(".node[data-node-id]").length === 2 && document.querySelectorAll(".gpu[data-gpu]").length === 8 && document.querySelectorAll(".gpu.mig").length === 1`)
	b.screenshot("cluster")

	// Created after the page loaded: it must appear by polling alone.
	group := createGroup(t, c, "dash-train", "STRICT_PACK", gpus(2), gpus(2))
	took := b.waitFor(5*time.Second, "the new group's 4 GPUs coloured", fmt.Sprintf(`document.querySelectorAll('.gpu[data-pg-id=%q]').length === 4`, group))
	t.Logf("the page showed the new group after %s", took.Round(time.Millisecond))
	if legend := b.text("#legend"); !strings.Contains(legend, "dash-train") || !strings.Contains(legend, "queue everyone") {
		t.Errorf("legend %q does not name dash-train and its queue", legend)
	}
	// Labelled by queue besides group: the group's GPUs carry its queue.
	b.waitFor(5*time.Second, "the group's GPUs marked with its queue", fmt.Sprintf(`document.querySelectorAll('.gpu[data-pg-id=%q][data-pg-queue="everyone"] .queue-mark').length === 4`, group))

	// Allocated versus used: the simulated GPUs do what the control file says; the raylet
	// samples it and the heartbeat carries it to the head.
	control := filepath.Join(c.Workers[0].SessionDir, gpusim.ActivityFileName)
	if err := gpusim.WriteSimActivity(control, gpusim.SimActivityFile{GPUs: map[string]gpusim.SimActivity{
		"*": {SMActive: 0.03, GrEngineActive: 0.03, FBUsedBytes: 3 << 30},
	}}); err != nil {
		t.Fatal(err)
	}
	usedText := func(selector string) string {
		return fmt.Sprintf(`Array.from(document.querySelectorAll(%q)).map((g) => g.querySelector(".used").innerText + " | " + ((g.querySelector(".mem") || {}).innerText || "")).join("\n")`, selector)
	}
	took = b.waitFor(15*time.Second, "each GPU's measured use beside its allocation", fmt.Sprintf(`(() => {
		const held = %s.split("\n"), free = %s.split("\n");
		return held.length === 4 && held.every((s) => s === "allocated, 3 %% used | 3.0 GiB in use") &&
			free.length > 0 && free.every((s) => s === "free, 3 %% used | 3.0 GiB in use");
	})()`, usedText(fmt.Sprintf(`.gpu[data-pg-id=%q]`, group)), usedText(`.gpu[data-gpu]:not(.mig):not(.held)`)))
	t.Logf("the page showed the written activity after %s", took.Round(time.Millisecond))
	// The state API the page reads says the same.
	harness.Eventually(t, 10*time.Second, "the node row's measured activity", func() error {
		workers := list(t, dashboard, "/api/v0/nodes?detail=all&filter_keys=is_head_node&filter_predicates=%3D&filter_values=false").Data.Result.Result
		if len(workers) != 1 {
			return fmt.Errorf("%d worker node rows, want 1", len(workers))
		}
		var node struct {
			GPUs []struct {
				SMActive    *float64 `json:"sm_active"`
				FBUsedBytes *uint64  `json:"fb_used_bytes"`
			} `json:"gpus"`
		}
		if err := json.Unmarshal(workers[0], &node); err != nil {
			return err
		}
		for i, g := range node.GPUs {
			if g.SMActive == nil || math.Abs(*g.SMActive-0.03) > 1e-9 || g.FBUsedBytes == nil || *g.FBUsedBytes != 3<<30 {
				return fmt.Errorf("GPU %d: sm_active %v, fb_used_bytes %v", i, g.SMActive, g.FBUsedBytes)
			}
		}
		return nil
	})
	// A MIG slice, carved for its group, is drawn on its GPU in the group's colour.
	slice := createGroup(t, c, "dash-mig", "PACK", map[string]float64{"nvidia.com/mig-1g.10gb": 1})
	b.waitFor(10*time.Second, "the MIG slice coloured", fmt.Sprintf(`document.querySelectorAll('.slice[data-pg-id=%q]').length === 1`, slice))
	b.screenshot("cluster-with-groups")

	b.showPage("groups")
	b.waitFor(5*time.Second, "the group's row, CREATED", fmt.Sprintf(`(document.querySelector('tr[data-pg-id=%q]') || {innerText: ""}).innerText.includes("CREATED")`, group))
	if row := b.text(fmt.Sprintf(`tr[data-pg-id=%q]`, group)); !strings.Contains(row, "STRICT_PACK") || !strings.Contains(row, "dash-train") || !strings.Contains(row, "everyone") {
		t.Errorf("group row %q: want its name, strategy and queue", row)
	}
	b.screenshot("placement-groups")

	// 4 GPUs held, 4 free, a nominal quota of 6: a 4-GPU gang waits for quota.
	waiting := createGroup(t, c, "dash-waits", "STRICT_PACK", gpus(4))
	b.showPage("pending")
	b.waitFor(10*time.Second, "the waiting group with its reason code", fmt.Sprintf(`(document.querySelector('tr[data-pending-id=%q]') || {innerText: ""}).innerText.includes("QuotaExceeded")`, waiting))
	b.screenshot("pending")
	// The same code for the same group in raygo status and in /metrics.
	status, _, code := c.Run("status")
	line := ""
	for _, l := range strings.Split(status, "\n") {
		if strings.Contains(l, "pg_"+waiting[:12]) {
			line = l
		}
	}
	if code != 0 || !strings.Contains(line, "[QuotaExceeded]") {
		t.Errorf("raygo status's line of the waiting group %q lacks [QuotaExceeded] (exit %d):\n%s", line, code, status)
	}
	if _, metrics, _ := get(t, dashboard, "/metrics"); !strings.Contains(string(metrics), `raygo_pending_workloads{reason="QuotaExceeded"} 1`+"\n") {
		t.Errorf("/metrics does not count the group as QuotaExceeded:\n%s", metrics)
	}

	b.showPage("queues")
	b.waitFor(5*time.Second, "the queue's GPU usage", `(document.querySelector('[data-queue="everyone"]') || {innerText: ""}).innerText.includes("5 / 6")`)
	b.screenshot("queues")

	b.showPage("autoscaler")
	b.waitFor(5*time.Second, "instances by state", `(document.getElementById("autoscaler-summary") || {innerText: ""}).innerText.includes("RAY_")`)
	b.screenshot("autoscaler")

	b.showPage("latency")
	b.waitFor(5*time.Second, "decisions counted", `/^[1-9][0-9]* decisions/.test((document.getElementById("latency-summary") || {innerText: ""}).innerText)`)
	b.screenshot("decision-latency")

	b.do("open /dashboard/", chromedp.Navigate("http://"+dashboard+"/dashboard/#groups"))
	b.waitFor(10*time.Second, "/dashboard/ shows the groups page", fmt.Sprintf(`document.getElementById("page-groups").classList.contains("active") && document.querySelector('tr[data-pg-id=%q]') !== null`, group))
	b.noExceptions()
}

// With auth on, every path of the dashboard port (page, files, API, /metrics) refuses a
// request without the token, even from loopback; with it as a bearer header it answers;
// a browser given it once as ?token= keeps it in an HttpOnly cookie and the live page
// works.
func TestDashboardNeedsTheToken(t *testing.T) {
	t.Parallel()
	_, dashboard, token := startCluster(t, t.TempDir())

	paths := []string{"/", "/dashboard/", "/dashboard/app.js", "/dashboard/style.css", "/metrics",
		"/api/v0/nodes", "/api/v0/placement_groups", "/api/v0/actors", "/api/v0/jobs", "/api/v0/cluster_status", "/api/raygo/queues", "/api/raygo/decision_latency",
		"/api/v0/nodes?limit=1", "/no/such/path"}
	for _, path := range paths {
		for name, headers := range map[string][]string{
			"no token":     nil,
			"wrong bearer": {"Authorization", "Bearer " + token + "x"},
			"wrong cookie": {"Cookie", "raygo_token=" + token + "x"},
			"basic auth":   {"Authorization", "Basic " + token},
		} {
			if code, body, _ := get(t, dashboard, path, headers...); code != http.StatusUnauthorized || strings.Contains(string(body), token) {
				t.Errorf("GET %s with %s: %d, want 401", path, name, code)
			}
		}
		separator := "?"
		if strings.Contains(path, "?") {
			separator = "&"
		}
		if code, _, _ := get(t, dashboard, path+separator+"token=wrong"); code != http.StatusUnauthorized {
			t.Errorf("GET %s?token=wrong: %d, want 401", path, code)
		}
		want := http.StatusOK
		if path == "/no/such/path" {
			want = http.StatusNotFound
		}
		if code, _, _ := get(t, dashboard, path, "Authorization", "Bearer "+token); code != want {
			t.Errorf("GET %s with the token: %d, want %d", path, code, want)
		}
	}
	code, _, resp := get(t, dashboard, "/?token="+token)
	cookies := resp.Cookies()
	if code != http.StatusSeeOther || resp.Header.Get("Location") != "/" || len(cookies) != 1 || !cookies[0].HttpOnly {
		t.Errorf("/?token=: %d to %q with cookies %v, want 303 to / with one HttpOnly cookie", code, resp.Header.Get("Location"), cookies)
	}

	b := startBrowser(t)
	b.do("open the dashboard without the token", chromedp.Navigate("http://"+dashboard+"/"))
	b.waitFor(5*time.Second, "refused", `document.body.innerText.includes("requires its token")`)
	b.screenshot("refused")
	b.do("open the dashboard with ?token=", chromedp.Navigate("http://"+dashboard+"/?token="+token))
	b.waitFor(15*time.Second, "the nodes drawn", `document.querySelectorAll(".node[data-node-id]").length === 2`)
	if location, err := chromedp.Run(b.ctx, chromedp.Location()); err != nil || strings.Contains(location, token) {
		t.Errorf("the address bar still holds the token: %q (%v)", location, err)
	}
	polls, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.dataset.polls`))
	b.waitFor(5*time.Second, "polling on with the cookie", fmt.Sprintf(`Number(document.body.dataset.polls) > %s + 1`, polls))
	b.screenshot("with-token")
	b.noExceptions()
}
