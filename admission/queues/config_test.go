package queues

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/resources"
)

func loadExample(t *testing.T) *Config {
	t.Helper()
	data, err := os.ReadFile("testdata/issue-example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Load(data)
	if err != nil {
		t.Fatalf("the documented example must load: %v", err)
	}
	return c
}

func TestIssueExampleLoads(t *testing.T) {
	c := loadExample(t)
	research, ok := c.Queue("research")
	if !ok || research.Cohort != "ml" || research.QueueingStrategy != BestEffortFIFO {
		t.Fatalf("research = %+v", research)
	}
	gpu := research.Quotas()[resources.GPU]
	if gpu.Nominal != 8*resources.AmountScale || gpu.Borrowing != 8*resources.AmountScale || gpu.Lending != gpu.Nominal {
		t.Fatalf("research GPU quota = %+v", gpu)
	}
	cpu := research.Quotas()[resources.CPU]
	if cpu.Borrowing != Unlimited {
		t.Fatalf("absent borrowingLimit in a cohort must be unlimited, got %v", cpu.Borrowing)
	}
	prod, _ := c.Queue("prod")
	if prod.Quotas()[resources.GPU].Borrowing != 0 || prod.Preemption.ReclaimWithinCohort != "Any" {
		t.Fatalf("prod = %+v", prod)
	}
	if v, err := c.Priority("training", "research"); err != nil || v != 500 {
		t.Fatalf("training = %d, %v", v, err)
	}
	if v, err := c.Priority("system-critical", "prod"); err != nil || v != 1_000_000 {
		t.Fatalf("shipped class system-critical = %d, %v", v, err)
	}
	if pc, _ := c.PriorityClass("production-inference"); *pc.Preemptible {
		t.Fatal("production-inference is not preemptible")
	}
	if pc, _ := c.PriorityClass("training"); !*pc.Preemptible {
		t.Fatal("absent preemptible means true")
	}
}

func TestDefaultPriorityClasses(t *testing.T) {
	c := Default()
	want := map[string]int64{"system-critical": 1_000_000, "production-inference": 10_000, "training-high": 1_000, "training": 500, "development": 100}
	for name, value := range want {
		if got, err := c.Priority(name, DefaultQueueName); err != nil || got != value {
			t.Errorf("%s = %d, %v; want %d", name, got, err, value)
		}
	}
	if _, err := c.Priority("nope", DefaultQueueName); !errors.Is(err, ErrUnknownPriorityClass) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown class: %v", err)
	}
	if err := c.CheckQueue("nope"); !errors.Is(err, ErrUnknownQueue) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown queue: %v", err)
	}
	if err := c.CheckQueue(DefaultQueueName); err != nil {
		t.Errorf("the default queue always exists: %v", err)
	}
}

func TestNamespaceResolution(t *testing.T) {
	c, err := Load([]byte(`
queues:
  - {name: research, namespaces: ["research", "research-*"]}
  - {name: special, namespaces: ["research-special"]}
  - {name: prod, namespaces: ["prod"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	for ns, want := range map[string]string{
		"research": "research", "research-a": "research", "research-special": "special",
		"prod": "prod", "prod-x": DefaultQueueName, "": DefaultQueueName, "researc": DefaultQueueName,
	} {
		if got := c.QueueForNamespace(ns); got != want {
			t.Errorf("namespace %q -> %q, want %q", ns, got, want)
		}
	}
}

func TestBadConfigsNameTheField(t *testing.T) {
	cases := []struct {
		name, yaml, field, problem string
		sentinel                   error
	}{
		{"unknown top field", "queus: []", "queus", "unknown field", ErrInvalidConfig},
		{"unknown nested field", "queues: [{name: a, resources: {GPU: {nominalQuot: 1}}}]", `queues[0].resources["GPU"].nominalQuot`, "unknown field", ErrInvalidConfig},
		{"negative quota", "queues: [{name: a, resources: {GPU: {nominalQuota: -1}}}]", `queues[0].resources["GPU"].nominalQuota`, ">= 0", resources.ErrInvalidAmount},
		{"missing nominal", "queues: [{name: a, cohort: c, resources: {GPU: {borrowingLimit: 1}}}]", `queues[0].resources["GPU"].nominalQuota`, "required", ErrInvalidConfig},
		{"borrowing without cohort", "queues: [{name: a, resources: {GPU: {nominalQuota: 1, borrowingLimit: 2}}}]", `queues[0].resources["GPU"].borrowingLimit`, "cohort", ErrInvalidConfig},
		{"lending above nominal", "queues: [{name: a, cohort: c, resources: {GPU: {nominalQuota: 1, lendingLimit: 2}}}]", `queues[0].resources["GPU"].lendingLimit`, "at most", ErrInvalidConfig},
		{"namespace twice", "queues: [{name: a, namespaces: [x]}, {name: b, namespaces: [x]}]", "queues[1].namespaces[0]", `queue "a"`, ErrNamespaceConflict},
		{"overlapping globs", "queues: [{name: a, namespaces: [\"re*\"]}, {name: b, namespaces: [\"research-*\"]}]", "queues[1].namespaces[0]", "can match", ErrNamespaceConflict},
		{"star glob overlaps all", "queues: [{name: a, namespaces: [\"x*\"]}, {name: b, namespaces: [\"*\"]}]", "queues[1].namespaces[0]", "can match", ErrNamespaceConflict},
		{"inner glob", "queues: [{name: a, namespaces: [\"a*b\"]}]", "queues[0].namespaces[0]", "prefix*", ErrInvalidConfig},
		{"parentName", "cohorts: [{name: ml, parentName: all}]", "cohorts[0].parentName", "flat", ErrInvalidConfig},
		{"queue twice", "queues: [{name: a}, {name: a}]", "queues[1].name", "twice", ErrInvalidConfig},
		{"cohort and cohortName differ", "queues: [{name: a, cohort: x, cohortName: y}]", "queues[0].cohortName", "differs", ErrInvalidConfig},
		{"strategy", "queues: [{name: a, queueingStrategy: LIFO}]", "queues[0].queueingStrategy", "StrictFIFO", ErrInvalidConfig},
		{"negative weight", "queues: [{name: a, fairSharing: {weight: -1}}]", "queues[0].fairSharing.weight", ">= 0", ErrInvalidConfig},
		{"preemption policy", "queues: [{name: a, preemption: {reclaimWithinCohort: Some}}]", "queues[0].preemption.reclaimWithinCohort", "Any", ErrInvalidConfig},
		{"unknown default class", "queues: [{name: a, defaultPriorityClass: gold}]", "queues[0].defaultPriorityClass", `"gold"`, ErrInvalidConfig},
		{"unknown MIG profile", "queues: [{name: a, resources: {nvidia.com/mig-9g.1gb: {nominalQuota: 1}}}]", `queues[0].resources["nvidia.com/mig-9g.1gb"]`, "MIG profile", resources.ErrUnknownMIGProfile},
		{"fair sharing strategy", "fairSharing: {enable: true, preemptionStrategies: [Fast]}", "fairSharing.preemptionStrategies[0]", "LessThanInitialShare", ErrInvalidConfig},
		{"empty name", "queues: [{cohort: c}]", "queues[0].name", "empty", ErrInvalidConfig},
		{"bad duration", "queues: [{name: a, preemption: {preemptionDelay: 5 minutes}}]", "queues[0].preemption.preemptionDelay", "30s", ErrInvalidConfig},
		{"unitless duration", "priorityClasses: [{name: x, value: 1, minRuntime: 30}]", "priorityClasses[0].minRuntime", "units", ErrInvalidConfig},
		{"negative duration", "queues: [{name: a, preemption: {minRuntime: -1s}}]", "queues[0].preemption.minRuntime", "duration", ErrInvalidConfig},
		{"grace period too long", "priorityClasses: [{name: x, value: 1, gracePeriod: 11m}]", "priorityClasses[0].gracePeriod", "at most 10m", ErrInvalidConfig},
		{"borrow policy", "queues: [{name: a, preemption: {borrowWithinCohort: {policy: Any}}}]", "queues[0].preemption.borrowWithinCohort.policy", "LowerPriority", ErrInvalidConfig},
		{"string quota", "queues: [{name: a, resources: {GPU: {nominalQuota: lots}}}]", "", "lots", ErrInvalidConfig},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load([]byte(tc.yaml))
			var fe *fielderr.Error
			if !errors.As(err, &fe) {
				t.Fatalf("want a *fielderr.Error, got %v", err)
			}
			if fe.Field != tc.field || !strings.Contains(fe.Problem, tc.problem) {
				t.Fatalf("got field %q problem %q; want field %q problem containing %q", fe.Field, fe.Problem, tc.field, tc.problem)
			}
			if !errors.Is(err, tc.sentinel) || !errors.Is(err, fielderr.ErrInvalid) {
				t.Fatalf("%v does not wrap %v and fielderr.ErrInvalid", err, tc.sentinel)
			}
		})
	}
}

func TestCohortNameIsAcceptedAsCohort(t *testing.T) {
	c, err := Load([]byte("queues: [{name: a, cohortName: ml, resources: {GPU: {nominalQuota: 1, borrowingLimit: 3, lendingLimit: 0}}}]"))
	if err != nil {
		t.Fatal(err)
	}
	q, _ := c.Queue("a")
	if q.Cohort != "ml" || q.Quotas()["GPU"].Lending != 0 || q.Quotas()["GPU"].Borrowing != 3*resources.AmountScale {
		t.Fatalf("%+v %+v", q, q.Quotas())
	}
}

func TestEmptyConfigLoads(t *testing.T) {
	for _, in := range []string{"", "{}", "# nothing\n"} {
		if _, err := Load([]byte(in)); err != nil {
			t.Errorf("%q: %v", in, err)
		}
	}
}

// The README's example must stay true to the loader.
func TestReadmeExampleLoads(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Queue configuration")
	_, block, ok2 := strings.Cut(section, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README has no yaml block under ## Queue configuration")
	}
	if _, err := Load([]byte(block)); err != nil {
		t.Fatalf("README example: %v", err)
	}
}

func TestPreemptionKnobs(t *testing.T) {
	c := loadExample(t)
	prod, _ := c.Queue("prod")
	if prod.Preemption.PreemptionDelay != 2*Minute || prod.Preemption.MinRuntime != 10*Minute {
		t.Fatalf("prod preemption = %+v", prod.Preemption)
	}
	training, _ := c.PriorityClass("training")
	if training.MinRuntime != 15*Minute || training.Grace() != 2*Minute || !training.IsPreemptible() {
		t.Fatalf("training = %+v", training)
	}
	high, _ := c.PriorityClass("training-high")
	if high.MinRuntime != 0 || high.Grace() != DefaultGracePeriod {
		t.Fatalf("defaults: training-high = %+v, grace %s", high, high.Grace())
	}
	for _, pc := range DefaultPriorityClasses() {
		if pc.Grace() != 30*Second || pc.MinRuntime != 0 {
			t.Errorf("shipped class %s: grace %s minRuntime %s", pc.Name, pc.Grace(), pc.MinRuntime)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for text, want := range map[string]Duration{"0": 0, "30s": 30 * Second, "1h30m": 90 * Minute, "250ms": 250 * Millisecond, "1.5s": 1500 * Millisecond, "10m": 10 * Minute} {
		got, err := ParseDuration(text)
		if err != nil || got != want {
			t.Errorf("%q = %v, %v; want %v", text, got, err, want)
		}
		if back, err := ParseDuration(want.String()); err != nil || back != want {
			t.Errorf("%v does not round-trip through %q: %v, %v", want, want.String(), back, err)
		}
	}
	for _, bad := range []string{"", "5", "s", "-1s", "1d", "1e3s", "9999999h"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
