package tracereplay_test

import (
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/admission/queues"
	"github.com/raygo-dev/raygo/placement/tracereplay"
)

// Two tenants on the test nodes (19 GPUs): tenant a's tasks (qos LS) ask 7.5 GPUs a
// copy, b's (BE) 0.25. Compressed so that every copy arrives within seconds and runs
// for an hour, the stream saturates the cluster: allocation is measured, every task
// that waits gets a wait, and the fairness index is in (0, 1].
func TestTenantReplaySaturatesAndMeasures(t *testing.T) {
	nodes, err := tracereplay.ParseNodes([]byte(nodeCSV))
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := tracereplay.ParseTasks([]byte(`name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,creation_time,deletion_time
t-0,4000,8192,1,500,,LS,0,3600
t-1,8000,16384,1,1000,V100M32|G2,LS,100,3700
t-2,2000,4096,0,0,,BE,200,3800
t-3,16000,65536,4,1000,,LS,300,3900
t-4,1000,2048,1,250,nan,BE,400,4000
t-5,12000,16384,2,1000,,LS,500,4100
`))
	if err != nil {
		t.Fatal(err)
	}
	if tasks[3].CreationS != 300 || tasks[3].DeletionS != 3900 || tasks[3].QoS != "LS" {
		t.Fatalf("times and qos parsed as %+v", tasks[3])
	}
	config, err := queues.Load([]byte(`cohorts: [{name: c}]
queues:
  - {name: a, cohort: c, resources: {GPU: {nominalQuota: 15}}}
  - {name: b, cohort: c, resources: {GPU: {nominalQuota: 4}}}
fairSharing: {enable: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	tenantOf := func(task *tracereplay.Task) string {
		if task.QoS == "LS" {
			return "a"
		}
		return "b"
	}
	run := func(scale float64, copies int, baseline bool) (tracereplay.TenantResult, error) {
		return tracereplay.RunTenants(tracereplay.TenantConfig{Nodes: nodes, Tasks: tasks, Queues: config, TenantOf: tenantOf,
			TimeScale: scale, Copies: copies, TickS: 1, Baseline: baseline})
	}
	// At the trace's times one copy asks for 7.75 of 19 GPUs: never saturated.
	if _, err := run(1, 1, false); err == nil || !strings.Contains(err.Error(), "compress more") {
		t.Fatalf("an unsaturated stream: %v, want an error asking for more compression", err)
	}
	for _, baseline := range []bool{false, true} {
		result, err := run(100, 6, baseline)
		if err != nil {
			t.Fatal(err)
		}
		if result.PeakDemandGPUs <= result.CapacityGPUs || result.CapacityGPUs != 19 {
			t.Fatalf("peak demand %g of %g GPUs", result.PeakDemandGPUs, result.CapacityGPUs)
		}
		if result.AllocationPct <= 0 || result.AllocationPct > 100 || result.Admitted == 0 || result.Admitted >= result.Arrived {
			t.Fatalf("baseline %v: %+v", baseline, result)
		}
		if result.Jain <= 0 || result.Jain > 1 || result.WaitP95S["a"] < result.WaitP50S["a"] || result.WaitP95S["a"] == 0 {
			t.Fatalf("baseline %v: jain %g, waits %v %v", baseline, result.Jain, result.WaitP50S, result.WaitP95S)
		}
		if result.UsageGPUs["a"] > result.DemandGPUs["a"] || result.UsageGPUs["a"]+result.UsageGPUs["b"] > 19 {
			t.Fatalf("baseline %v: usage %v, demand %v", baseline, result.UsageGPUs, result.DemandGPUs)
		}
	}
}
