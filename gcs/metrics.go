package gcs

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// The head's metrics, in Prometheus' text format on the dashboard port (/metrics). The
// tables' figures are read at each scrape; the scheduler's decision latency and commit
// outcomes are counted as they happen. README's metrics table names them.

// fragmentationShapes are the shapes of raygo_gpus_free_unschedulable: 1, 2, 4 and 8
// whole GPUs in one NVLink island.
var fragmentationShapes = []int{1, 2, 4, 8}

// pgMetrics are the placement-group manager's event metrics. A nil *pgMetrics counts
// nothing (managers built by tests).
type pgMetrics struct {
	decisionSeconds prometheus.Histogram
	commits         *prometheus.CounterVec
}

func newPGMetrics() *pgMetrics {
	return &pgMetrics{
		decisionSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "raygo_scheduling_decision_seconds",
			Help: "Time of one placement decision (placement.Schedule) for a pending group.",
			// 100 µs to about 3 s.
			Buckets: prometheus.ExponentialBuckets(100e-6, 2, 15),
		}),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "raygo_placement_group_commits_total",
			Help: "Two-phase reservations of placement groups by outcome: created, or requeued (a prepare or commit failed, or the group was removed meanwhile).",
		}, []string{"outcome"}),
	}
}

// schedule is placement.Schedule, timed into raygo_scheduling_decision_seconds: every
// placement decision of the GCS (the scheduling round's and admission's) goes through it.
func (p *pgMetrics) schedule(snapshot *placement.Snapshot, request placement.Request) (placement.Plan, error) {
	began := time.Now()
	plan, err := placement.Schedule(snapshot, request)
	if p != nil {
		p.decisionSeconds.Observe(time.Since(began).Seconds())
	}
	return plan, err
}

func (p *pgMetrics) commit(outcome string) {
	if p != nil {
		p.commits.WithLabelValues(outcome).Inc()
	}
}

// tableCollector reads the GCS's tables at each scrape.
type tableCollector struct {
	s *Server

	nodes, resourcesTotal, resourcesAllocated, gpus, groups, pending, pendingAge, unschedulable, expected *prometheus.Desc
	pendingActors                                                                                         *prometheus.Desc
	queueNominal, queueUsage, queueBorrowed, queuePending, queueShare                                     *prometheus.Desc
	autoscalerInstances, autoscalerFailures, autoscalerInfeasible                                         *prometheus.Desc
	allocatedIdle                                                                                         *prometheus.Desc
	preemptions, preemptionDecisions                                                                      *prometheus.Desc
	migSlices                                                                                             *prometheus.Desc
	autoscalerLaunched                                                                                    *prometheus.Desc
}

func newTableCollector(s *Server) *tableCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &tableCollector{s: s,
		nodes:              d("raygo_nodes", "Nodes by state (ALIVE, DEAD; DRAINING counts ALIVE nodes that take no new work).", "state"),
		resourcesTotal:     d("raygo_resources_total", "Resources of the ALIVE nodes.", "resource"),
		resourcesAllocated: d("raygo_resources_allocated", "Resources of the ALIVE nodes held by placement groups, actors and tasks (total less what the raylets report available).", "resource"),
		gpus:               d("raygo_gpus", "Whole GPUs of the ALIVE nodes: total, allocated and free (MIG GPUs are counted by their slices, not here).", "state"),
		groups:             d("raygo_placement_groups", "Placement groups by state (REMOVED ones while they are listed).", "state"),
		pending:            d("raygo_pending_workloads", "PENDING and RESCHEDULING placement groups by pending-reason code (the one list of raygo's codes; empty: not tried yet).", "reason"),
		pendingActors:      d("raygo_pending_actors", "PENDING_CREATION and RESTARTING actors by pending-reason code (the one list of raygo's codes; empty: not held by admission).", "reason"),
		pendingAge:         d("raygo_pending_workload_age_seconds", "How long the PENDING and RESCHEDULING placement groups have waited so far (since creation), as a histogram of the groups waiting now."),
		unschedulable:      d("raygo_gpus_free_unschedulable", "Free GPUs a request of the shape (k whole GPUs in one NVLink island) could not use: the sum over the NVLink islands of the ALIVE nodes of (wholly free GPUs mod k); for shape mig-<profile>, the free compute slices of the MIG GPUs where no instance of the profile can be had now.", "shape"),
		expected:           d("raygo_gpu_fragmentation_expected", "Expected free GPUs a request drawn from the recent workload could not use (FGD's expectation over the shapes the GCS saw asked)."),
		queueNominal:       d("raygo_queue_nominal_quota", "A queue's nominal quota per resource (with --queues).", "queue", "resource"),
		queueUsage:         d("raygo_queue_usage", "What a queue's admitted work holds (groups, actors and task leases outside groups), per resource.", "queue", "resource"),
		queueBorrowed:      d("raygo_queue_borrowed", "A queue's usage above its nominal quota, per resource.", "queue", "resource"),
		queuePending:       d("raygo_queue_pending_workloads", "Placement groups, and actors outside groups, waiting for admission in a queue.", "queue"),
		queueShare:         d("raygo_queue_dominant_share", "A queue's fair-sharing dominant share.", "queue"),
		autoscalerInstances: d("raygo_autoscaler_pending_instances", "Instances the autoscaler is launching that have not joined yet, by node type and Ray instance state (QUEUED/REQUESTED, ALLOCATED, RAY_INSTALLING), from its last report.",
			"node_type", "state"),
		autoscalerFailures:   d("raygo_autoscaler_recent_failures", "Launches, installs and gangs that failed in the autoscaler's recent history (its last report), by node type (\"\" for a gang) and cause (the instance state it failed in: ALLOCATION_FAILED, RAY_INSTALL_FAILED, ...).", "node_type", "cause"),
		autoscalerLaunched:   d("raygo_autoscaler_launched_instances_total", "Instances the autoscaler launched since it started, by node type (its last report).", "node_type"),
		migSlices:            d("raygo_mig_slices", "Memory slices of the ALIVE nodes' MIG GPUs: held by bundles, idle (carved, kept for reuse) and free (no instance covers them); unusable counts the free ones no profile can be carved on now.", "state"),
		preemptions:          d("raygo_queue_preemptions_total", "Preemption notices given to placement groups since this GCS started, by the victim's queue and the reason (Kueue's eviction reasons; SpotInterruption for a spot node going away).", "queue", "reason"),
		preemptionDecisions:  d("raygo_preemption_decisions_total", "Preemption decisions for held-back placement groups since this GCS started, by outcome (fits, preempt, wait, cannot) and cause (why nothing was evicted: within_preemption_delay, new_capacity_sooner for a wait for the autoscaler's new nodes, no_candidates, not_enough, blast_radius, infeasible, invalid_input; empty for fits and preempt).", "outcome", "cause"),
		allocatedIdle:        d("raygo_gpus_allocated_idle", "Whole GPUs placement groups hold whose SM activity stayed under 10 % for 10 minutes (the raylets' measure), by the groups' queue (\"\" without queues).", "queue"),
		autoscalerInfeasible: d("raygo_autoscaler_infeasible_demands", "Pending demand the autoscaler reported no node type could hold, or a limit holds back (its last report)."),
	}
}

func (c *tableCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c *tableCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(desc *prometheus.Desc, value float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, value, labels...)
	}
	// Nodes and resources, from the node table.
	nodes, err := c.s.nodes.GetAllNodeInfo(context.Background(), &pb.GetAllNodeInfoRequest{})
	if err == nil {
		states := map[string]float64{"ALIVE": 0, "DEAD": 0, "DRAINING": 0}
		total, available := resources.Set{}, resources.Set{}
		for _, n := range nodes.Nodes {
			states[n.State.String()]++
			if n.State != pb.NodeState_ALIVE {
				continue
			}
			if n.IsDraining {
				states["DRAINING"]++
			}
			if t, err := resources.SetFromFloat(n.ResourcesTotal); err == nil {
				total = total.Add(t)
			}
			if a, err := resources.SetFromFloat(n.ResourcesAvailable); err == nil {
				available = available.Add(a)
			}
		}
		for state, count := range states {
			gauge(c.nodes, count, state)
		}
		for _, name := range total.Names() {
			gauge(c.resourcesTotal, total[name].Float(), name)
			gauge(c.resourcesAllocated, max(total[name]-available[name], 0).Float(), name)
		}
		gpuTotal, gpuFree := total[resources.GPU].Float(), available[resources.GPU].Float()
		gauge(c.gpus, gpuTotal, "total")
		gauge(c.gpus, gpuTotal-gpuFree, "allocated")
		gauge(c.gpus, gpuFree, "free")
	}
	// Groups by state and pending reason; the GCS's own view of the GPUs for the
	// fragmentation figures.
	byState, byReason, ages, held, workload := c.s.pgs.metricsView(c.s.cfg.Now())
	for _, state := range pb.PlacementGroupState_name {
		gauge(c.groups, byState[state], state)
	}
	for reason, count := range byReason {
		gauge(c.pending, count, reason)
	}
	for reason, count := range c.s.actors.pendingByReason() {
		gauge(c.pendingActors, count, reason)
	}
	buckets := map[float64]uint64{}
	sum := 0.0
	for _, age := range ages {
		sum += age
		for _, bound := range pendingAgeBuckets {
			if age <= bound {
				buckets[bound]++
			}
		}
	}
	ch <- prometheus.MustNewConstHistogram(c.pendingAge, uint64(len(ages)), sum, buckets)
	if view, err := buildView(c.s.nodes.schedulingNodes(), held); err == nil {
		unschedulable, expected := placement.ClusterFragmentation(view.snapshot.Nodes(), fragmentationShapes, &workload)
		for i, k := range fragmentationShapes {
			gauge(c.unschedulable, float64(unschedulable[i]), strconv.Itoa(k))
		}
		// MIG slices by state, over the slot maps the raylets reported.
		slices := map[string]float64{"held": 0, "idle": 0, "free": 0, "unusable": 0}
		for _, n := range view.snapshot.Nodes() {
			if !n.Alive {
				continue
			}
			for _, g := range n.MIGGPUs {
				if usage, err := g.SliceUsage(); err == nil {
					slices["held"] += float64(usage.Held)
					slices["idle"] += float64(usage.Idle)
					slices["free"] += float64(usage.Free)
					slices["unusable"] += float64(usage.Unusable)
				}
			}
		}
		for state, count := range slices {
			gauge(c.migSlices, count, state)
		}
		// MIG profiles: free compute slices a request of the profile could not use.
		for profile, slices := range placement.MIGUnschedulable(view.snapshot.Nodes()) {
			gauge(c.unschedulable, float64(slices), "mig-"+profile)
		}
		gauge(c.expected, expected)
	}
	for key, count := range c.s.pgs.preemptionCounts() {
		ch <- prometheus.MustNewConstMetric(c.preemptions, prometheus.CounterValue, float64(count), key[0], key[1])
	}
	for key, count := range c.s.pgs.preemptionDecisionCounts() {
		ch <- prometheus.MustNewConstMetric(c.preemptionDecisions, prometheus.CounterValue, float64(count), key[0], key[1])
	}
	// Allocated GPUs that stay idle, by the queue of the group holding them.
	byQueue := map[string]float64{}
	for group, count := range c.s.nodes.idleGPUsByGroup() {
		byQueue[c.s.pgs.queueOf(group)] += float64(count)
	}
	for queue, count := range byQueue {
		gauge(c.allocatedIdle, count, queue)
	}
	// The autoscaler, from its last report (none without one).
	if reported := c.s.autoscaler.lastReport(); reported != nil {
		instances := map[[2]string]float64{}
		for _, r := range reported.PendingInstanceRequests {
			instances[[2]string{r.RayNodeTypeName, "REQUESTED"}] += float64(r.Count)
		}
		for _, p := range reported.PendingInstances {
			instances[[2]string{p.RayNodeTypeName, p.Details}]++
		}
		for key, count := range instances {
			gauge(c.autoscalerInstances, count, key[0], key[1])
		}
		failures := map[[2]string]float64{}
		for _, f := range reported.FailedInstanceRequests {
			cause, _, _ := strings.Cut(f.Reason, ":")
			failures[[2]string{f.RayNodeTypeName, strings.TrimSpace(cause)}] += float64(max(f.Count, 1))
		}
		for key, count := range failures {
			gauge(c.autoscalerFailures, count, key[0], key[1])
		}
		gauge(c.autoscalerInfeasible, float64(len(reported.InfeasibleReasons)))
		for nodeType, count := range reported.LaunchedInstances {
			ch <- prometheus.MustNewConstMetric(c.autoscalerLaunched, prometheus.CounterValue, float64(count), nodeType)
		}
	}
	// Queues, as `raygo queues list` shows them.
	if queues, err := c.s.queueService().ListQueues(context.Background(), &pb.ListQueuesRequest{}); err == nil && queues.Enabled {
		for _, q := range queues.Queues {
			gauge(c.queuePending, float64(q.Pending), q.Queue)
			gauge(c.queueShare, q.DominantShare, q.Queue)
			for _, r := range q.Resources {
				gauge(c.queueNominal, r.NominalQuota, q.Queue, r.Resource)
				gauge(c.queueUsage, r.Usage, q.Queue, r.Resource)
				gauge(c.queueBorrowed, r.Borrowed, q.Queue, r.Resource)
			}
		}
	}
}

// pendingAgeBuckets are raygo_pending_workload_age_seconds' upper bounds: a minute to six
// hours (the shipped alert counts groups past 30 minutes).
var pendingAgeBuckets = []float64{60, 300, 1800, 3600, 6 * 3600}

// metricsView counts the groups by state and the pending ones by reason code, with how
// long each pending one has waited (seconds, at now), and returns the bundles the GCS
// holds and the workload it learned, for one scrape.
func (m *pgManager) metricsView(now time.Time) (byState, byReason map[string]float64, ages []float64, held []viewBundle, workload placement.WorkloadDistribution) {
	m.mu.Lock()
	defer m.mu.Unlock()
	byState, byReason = map[string]float64{}, map[string]float64{}
	for _, e := range m.groups {
		byState[e.info.State.String()]++
		if e.info.State == pb.PlacementGroupState_PENDING || e.info.State == pb.PlacementGroupState_RESCHEDULING {
			byReason[e.info.PendingReasonCode]++
			ages = append(ages, max(float64(now.UnixMilli()-e.info.Stats.GetCreationRequestReceivedMs())/1000, 0))
		}
	}
	byState[pb.PlacementGroupState_REMOVED.String()] += float64(len(m.removed))
	return byState, byReason, ages, m.heldBundlesLocked(), m.workload.Distribution()
}

// DashboardAddress is where /metrics and the dashboard are served ("" when they are not).
func (s *Server) DashboardAddress() string { return s.dashboard.Address() }
