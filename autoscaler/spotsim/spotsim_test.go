package spotsim

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/benchgate"
)

// weekFile is the committed data file: prices, rates, restart cost, the training mix
// and their sources.
type weekFile struct {
	OnDemandPerHour     float64 `json:"on_demand_per_hour"`
	SpotPerHour         float64 `json:"spot_per_hour"`
	CheckpointMinutes   float64 `json:"checkpoint_minutes"`
	RestartMinutes      float64 `json:"restart_minutes"`
	BootMinutes         float64 `json:"boot_minutes"`
	NoticeSeconds       float64 `json:"notice_seconds"`
	IdleTimeoutMinutes  float64 `json:"idle_timeout_minutes"`
	StepSeconds         float64 `json:"step_seconds"`
	SpanDays            float64 `json:"span_days"`
	MaxWorkers          int     `json:"max_workers"`
	Seed                uint64  `json:"seed"`
	InterruptionsPerDay []int   `json:"interruptions_per_day"`
	Jobs                []struct {
		Name  string  `json:"name"`
		Count int     `json:"count"`
		Nodes int     `json:"nodes"`
		Hours float64 `json:"hours"`
	} `json:"jobs"`
	Sources []struct {
		Figure string `json:"figure"`
		URL    string `json:"url"`
		Says   string `json:"says"`
		Note   string `json:"note"`
	} `json:"sources"`
}

func loadWeek(t *testing.T) (Params, []int) {
	t.Helper()
	raw, err := os.ReadFile("testdata/spot_week.json")
	if err != nil {
		t.Fatal(err)
	}
	var w weekFile
	if err := json.Unmarshal(raw, &w); err != nil {
		t.Fatalf("testdata/spot_week.json: %v", err)
	}
	minutes := func(m float64) time.Duration { return time.Duration(m * float64(time.Minute)) }
	p := Params{
		OnDemandPerHour: w.OnDemandPerHour, SpotPerHour: w.SpotPerHour,
		Checkpoint: minutes(w.CheckpointMinutes), RestartCost: minutes(w.RestartMinutes),
		Boot: minutes(w.BootMinutes), Notice: time.Duration(w.NoticeSeconds * float64(time.Second)),
		IdleTimeout: minutes(w.IdleTimeoutMinutes), Step: time.Duration(w.StepSeconds * float64(time.Second)),
		Span: time.Duration(w.SpanDays * 24 * float64(time.Hour)), MaxWorkers: w.MaxWorkers, Seed: w.Seed,
	}
	for _, j := range w.Jobs {
		p.Jobs = append(p.Jobs, JobClass{Name: j.Name, Count: j.Count, Nodes: j.Nodes, Hours: j.Hours})
	}
	return p, w.InterruptionsPerDay
}

// smallWeek is the committed parameters with a day's worth of jobs: fast enough for
// `make test`.
func smallWeek(t *testing.T) Params {
	p, _ := loadWeek(t)
	p.Span = 24 * time.Hour
	p.Jobs = []JobClass{{Name: "one", Count: 8, Nodes: 1, Hours: 3}, {Name: "two", Count: 3, Nodes: 2, Hours: 5}, {Name: "four", Count: 1, Nodes: 4, Hours: 6}}
	return p
}

func run(t *testing.T, p Params, market Market, perDay int) Result {
	t.Helper()
	res, err := Run(context.Background(), p, market, perDay)
	if err != nil {
		t.Fatalf("market %d, %d a day: %v", market, perDay, err)
	}
	return res
}

func workOf(p Params) time.Duration {
	var work time.Duration
	for _, c := range p.Jobs {
		work += time.Duration(c.Count*c.Nodes) * time.Duration(c.Hours*float64(time.Hour))
	}
	return work
}

func TestTheDataFileNamesASourceOrAnAssumptionForEveryFigure(t *testing.T) {
	raw, err := os.ReadFile("testdata/spot_week.json")
	if err != nil {
		t.Fatal(err)
	}
	var w weekFile
	if err := json.Unmarshal(raw, &w); err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	for _, s := range w.Sources {
		if s.URL == "" && s.Note == "" {
			t.Errorf("source of %q has neither a URL nor a note saying it is an assumption", s.Figure)
		}
		if s.URL != "" && s.Says == "" {
			t.Errorf("source of %q cites %s without what it says", s.Figure, s.URL)
		}
		covered[s.Figure] = true
	}
	for _, figure := range []string{"on_demand_per_hour", "spot_per_hour", "notice_seconds", "interruptions_per_day", "checkpoint_minutes", "restart_minutes", "boot_minutes", "jobs"} {
		if !covered[figure] {
			t.Errorf("no source or assumption for %s", figure)
		}
	}
}

func TestWithoutInterruptionsTheSavingIsThePriceRatio(t *testing.T) {
	p := smallWeek(t)
	onDemand := run(t, p, OnDemand, 0)
	spot := run(t, p, Spot, 0)
	if onDemand.NodeHours != spot.NodeHours || onDemand.Makespan != spot.Makespan {
		t.Fatalf("node hours %.2f vs %.2f, makespan %s vs %s: the same work should take the same nodes", onDemand.NodeHours, spot.NodeHours, onDemand.Makespan, spot.Makespan)
	}
	want := 100 * (1 - p.SpotPerHour/p.OnDemandPerHour)
	if got := SavingPct(onDemand, spot); math.Abs(got-want) > 1e-9 {
		t.Fatalf("saving = %.12f %%, want %.12f %% (1 − spot/on-demand)", got, want)
	}
	if spot.Launched[OnDemandType] != 0 || spot.Launched[SpotType] == 0 {
		t.Fatalf("spot run launched %v, want spot nodes only (the cheaper type)", spot.Launched)
	}
	if spot.Notices != 0 || spot.LostWork != 0 {
		t.Fatalf("notices %d, lost work %s, want none", spot.Notices, spot.LostWork)
	}
}

func TestEveryRunCompletesTheSameWorkAndPaysForAtLeastIt(t *testing.T) {
	p := smallWeek(t)
	work := workOf(p)
	for _, tc := range []struct {
		market Market
		perDay int
	}{{OnDemand, 0}, {Spot, 0}, {Spot, 5}, {Spot, 15}} {
		res := run(t, p, tc.market, tc.perDay)
		if res.Work != work || res.JobsDone != 12 {
			t.Errorf("market %d, %d a day: work %s in %d jobs, want %s in 12", tc.market, tc.perDay, res.Work, res.JobsDone, work)
		}
		if paid := time.Duration(res.NodeHours * float64(time.Hour)); paid < work+res.LostWork {
			t.Errorf("market %d, %d a day: paid %s of node time for %s of work and %s redone", tc.market, tc.perDay, paid, work, res.LostWork)
		}
	}
}

func TestAnInterruptionCostsTheWorkSinceTheCheckpointAndLaunchesAReplacement(t *testing.T) {
	p := smallWeek(t)
	clean := run(t, p, Spot, 0)
	hit := run(t, p, Spot, 15)
	if hit.Notices == 0 || hit.HitJobs == 0 {
		t.Fatalf("notices %d (%d on jobs), want some on jobs", hit.Notices, hit.HitJobs)
	}
	if hit.LostWork <= 0 || hit.LostWork > time.Duration(hit.HitJobs*4)*p.Checkpoint {
		t.Fatalf("lost work %s for %d interrupted jobs, want > 0 and at most a checkpoint interval × nodes each", hit.LostWork, hit.HitJobs)
	}
	if hit.Launched[SpotType] <= clean.Launched[SpotType] {
		t.Fatalf("spot launches %d with interruptions, %d without: the interrupted nodes were not replaced", hit.Launched[SpotType], clean.Launched[SpotType])
	}
	if hit.Cost <= clean.Cost {
		t.Fatalf("cost %.2f with interruptions, %.2f without", hit.Cost, clean.Cost)
	}
}

func TestMoreInterruptionsNeverSaveMore(t *testing.T) {
	p := smallWeek(t)
	for _, seed := range []uint64{1, 2, 3} {
		p.Seed = seed
		onDemand := run(t, p, OnDemand, 0)
		last := math.Inf(1)
		for _, perDay := range []int{0, 5, 15} {
			saving := SavingPct(onDemand, run(t, p, Spot, perDay))
			if saving > last {
				t.Errorf("seed %d: %d interruptions a day save %.2f %%, more than fewer did (%.2f %%)", seed, perDay, saving, last)
			}
			last = saving
		}
	}
}

// TestBenchSpotCostSaving prints BENCH spot_cost_saving_pct_<n>_per_day for the committed
// week (testdata/spot_week.json). It is not a test and is skipped unless RAYGO_BENCH=1.
func TestBenchSpotCostSaving(t *testing.T) {
	benchgate.Require(t)
	p, rates := loadWeek(t)
	onDemand := run(t, p, OnDemand, 0)
	fmt.Printf("spot week: on-demand only $%.0f, %.1f node-hours, last job after %s\n", onDemand.Cost, onDemand.NodeHours, onDemand.Makespan.Round(time.Minute))
	for _, perDay := range rates {
		spot := run(t, p, Spot, perDay)
		fmt.Printf("spot week, %d interruptions a day: $%.0f, %.1f node-hours, %d notices (%d on jobs), %.1f node-hours redone, last job after %s, launched %v\n",
			perDay, spot.Cost, spot.NodeHours, spot.Notices, spot.HitJobs, spot.LostWork.Hours(), spot.Makespan.Round(time.Minute), spot.Launched)
		fmt.Printf("BENCH spot_cost_saving_pct_%d_per_day %.1f %%\n", perDay, SavingPct(onDemand, spot))
	}
}
