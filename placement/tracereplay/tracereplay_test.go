package tracereplay_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/placement/tracereplay"
)

const nodeCSV = `sn,cpu_milli,memory_mib,gpu,model
n-0,32000,131072,2,T4
n-1,64000,262144,8,V100M32
n-2,16000,65536,1,P100
n-3,96000,393216,8,G2
`

const taskCSV = `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos
t-0,4000,8192,1,500,,LS
t-1,8000,16384,1,1000,V100M32|G2,LS
t-2,2000,4096,0,0,,BE
t-3,16000,65536,4,1000,,LS
t-4,1000,2048,1,250,nan,BE
t-5,12000,16384,2,1000,,LS
`

func parse(t *testing.T) ([]tracereplay.NodeSpec, []tracereplay.Task) {
	t.Helper()
	nodes, err := tracereplay.ParseNodes([]byte(nodeCSV))
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := tracereplay.ParseTasks([]byte(taskCSV))
	if err != nil {
		t.Fatal(err)
	}
	return nodes, tasks
}

func TestParse(t *testing.T) {
	nodes, tasks := parse(t)
	if len(nodes) != 4 || nodes[1].GPUs != 8 || nodes[1].Model != "V100M32" || nodes[0].CPUMilli != 32000 {
		t.Fatalf("nodes %+v", nodes)
	}
	if len(tasks) != 6 {
		t.Fatalf("%d tasks", len(tasks))
	}
	if got := tasks[1].GPUModels; len(got) != 2 || got[0] != "V100M32" || got[1] != "G2" {
		t.Fatalf("gpu_spec parsed as %v", got)
	}
	if len(tasks[4].GPUModels) != 0 || tasks[0].GPUMilliTotal() != 500 || tasks[3].GPUMilliTotal() != 4000 || tasks[2].GPUMilliTotal() != 0 {
		t.Fatalf("tasks %+v", tasks)
	}
}

func TestParseErrorsNameTheLineAndColumn(t *testing.T) {
	cases := []struct {
		name, csv, want string
		nodes           bool
	}{
		{"missing column", "name,cpu_milli\nt,1\n", `no column "memory_mib"`, false},
		{"bad number", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nt,x,1,0,0\n", "line 2: cpu_milli", false},
		{"too many GPUs", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nt,1,1,9,1000\n", "line 2: num_gpu", false},
		{"shared multi-GPU", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nt,1,1,2,500\n", "line 2: gpu_milli", false},
		{"GPU share missing", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nt,1,1,1,0\n", "line 2: gpu_milli", false},
		{"negative node GPUs", "sn,cpu_milli,memory_mib,gpu,model\nn,1,1,-1,T4\n", "line 2: gpu", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if c.nodes {
				_, err = tracereplay.ParseNodes([]byte(c.csv))
			} else {
				_, err = tracereplay.ParseTasks([]byte(c.csv))
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to mention %q", err, c.want)
			}
		})
	}
}

// The stream asks for at most the target and no task more would fit under it; the
// same seed gives the same stream.
func TestStream(t *testing.T) {
	_, tasks := parse(t)
	for _, target := range []float64{2000, 20000, 100000} {
		stream := tracereplay.Stream(tasks, target, rand.New(rand.NewPCG(1, 2)))
		var asked int64
		for i := range stream {
			asked += stream[i].GPUMilliTotal()
		}
		if float64(asked) > target || float64(asked) < target-4000 {
			t.Fatalf("target %v: the stream asks for %d", target, asked)
		}
		again := tracereplay.Stream(tasks, target, rand.New(rand.NewPCG(1, 2)))
		for i := range stream {
			if stream[i].Name != again[i].Name {
				t.Fatalf("target %v: streams differ at %d", target, i)
			}
		}
	}
}

func TestClusterApplyRefusesWhatDoesNotFit(t *testing.T) {
	nodes, tasks := parse(t)
	cluster := tracereplay.NewCluster(nodes)
	if cluster.TotalGPUMilli != 19000 {
		t.Fatalf("total %d milli-GPUs, want 19000", cluster.TotalGPUMilli)
	}
	share := &tasks[0] // 0.5 GPU
	if err := cluster.Apply(share, tracereplay.Choice{Node: 2, GPUs: []int{0}}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Apply(share, tracereplay.Choice{Node: 2, GPUs: []int{0}}); err != nil {
		t.Fatal(err) // two halves share the P100
	}
	if err := cluster.Apply(share, tracereplay.Choice{Node: 2, GPUs: []int{0}}); err == nil {
		t.Fatal("a third half of one GPU was accepted")
	}
	if cluster.Fits(2, share) {
		t.Fatal("Fits says the full P100 node takes a share")
	}
	if err := cluster.Apply(&tasks[1], tracereplay.Choice{Node: 0, GPUs: []int{0}}); err == nil {
		t.Fatal("a V100M32|G2 task was accepted on a T4 node")
	}
	if err := cluster.Apply(&tasks[5], tracereplay.Choice{Node: 1, GPUs: []int{3, 3}}); err == nil {
		t.Fatal("one GPU chosen twice was accepted")
	}
	if cluster.UsedGPUMilli != 1000 {
		t.Fatalf("used %d milli-GPUs, want 1000", cluster.UsedGPUMilli)
	}
}

// Every policy replays the small trace: each choice is checked by Cluster.Apply, the
// figures are shares, and the same seed gives the same result.
func TestEveryPolicyReplays(t *testing.T) {
	nodes, tasks := parse(t)
	policies := append([]tracereplay.Policy{&tracereplay.Raygo{}}, tracereplay.PaperPolicies()...)
	names := map[string]bool{}
	for _, policy := range policies {
		names[policy.Name()] = true
		for seed := range uint64(5) {
			config := tracereplay.DefaultConfig(nodes, tasks, seed)
			first, err := tracereplay.Run(config, policy)
			if err != nil {
				t.Fatalf("%s seed %d: %v", policy.Name(), seed, err)
			}
			if first.UnallocatedGPUPct < 0 || first.UnallocatedGPUPct > 100 || first.Placed+first.Failed != first.Arrived {
				t.Fatalf("%s seed %d: %+v", policy.Name(), seed, first)
			}
			second, err := tracereplay.Run(config, policy)
			if err != nil || second != first {
				t.Fatalf("%s seed %d: a second run gave %+v (%v), the first %+v", policy.Name(), seed, second, err, first)
			}
		}
	}
	for _, want := range []string{"raygo", "fgd", "bestfit", "dotprod", "packing", "clustering", "random"} {
		if !names[want] {
			t.Errorf("no policy %s", want)
		}
	}
}

// FGD puts a share on the partly used GPU when the workload is whole GPUs: there the
// share strands nothing more, on the idle node it would strand half a GPU.
func TestFGDPacksSharesAwayFromWholeGPUs(t *testing.T) {
	nodes := []tracereplay.NodeSpec{
		{Name: "a", CPUMilli: 8000, MemoryMiB: 1000, GPUs: 1, Model: "T4"},
		{Name: "b", CPUMilli: 8000, MemoryMiB: 1000, GPUs: 1, Model: "T4"},
	}
	whole := tracereplay.Task{Name: "whole", CPUMilli: 1000, GPUs: 1, GPUMilli: 1000}
	share := tracereplay.Task{Name: "share", CPUMilli: 1000, GPUs: 1, GPUMilli: 500}
	trace := []tracereplay.Task{whole, whole, whole, share}
	cluster := tracereplay.NewCluster(nodes)
	// b, the later name, is the partly used one: a tie would go to a.
	if err := cluster.Apply(&share, tracereplay.Choice{Node: 1, GPUs: []int{0}}); err != nil {
		t.Fatal(err)
	}
	fgd := &tracereplay.FGD{}
	if err := fgd.Start(cluster, trace); err != nil {
		t.Fatal(err)
	}
	choice, ok := fgd.Choose(cluster, &share, rand.New(rand.NewPCG(1, 1)))
	if !ok || choice.Node != 1 {
		t.Fatalf("FGD chose %+v (%v), want node b", choice, ok)
	}
}

// TypicalShapes keeps the most frequent shapes up to the coverage, weights summing to 1.
func TestTypicalShapes(t *testing.T) {
	a := tracereplay.Task{CPUMilli: 1000, GPUs: 1, GPUMilli: 500}
	b := tracereplay.Task{CPUMilli: 2000, GPUs: 2, GPUMilli: 1000}
	c := tracereplay.Task{CPUMilli: 3000}
	trace := []tracereplay.Task{a, a, a, a, a, a, b, b, b, c}
	shapes := tracereplay.TypicalShapes(trace, 0.85).Shapes
	if len(shapes) != 2 || shapes[0].GPUFraction != 5000 || shapes[1].GPUs != 2 {
		t.Fatalf("shapes %+v", shapes)
	}
	if sum := shapes[0].Weight + shapes[1].Weight; sum < 0.999 || sum > 1.001 || shapes[0].Weight < 0.66 || shapes[0].Weight > 0.67 {
		t.Fatalf("weights %v, %v", shapes[0].Weight, shapes[1].Weight)
	}
}
