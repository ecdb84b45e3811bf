// Package migsim measures MIG slice allocation: a simulated fleet of MIG GPUs serves a
// seeded stream of MIG slice requests and releases through placement.PlanMIG, once per
// policy on the same stream, and reports how many requests each policy accepted and
// how fragmented it left the fleet. It is the MIG benchmark of `make bench`
// (placement/mig_bench_test.go).
//
// Like placement it does no I/O, reads no clock and starts no goroutines: time is the
// stream's, randomness comes from seeds.
package migsim

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/placement"
)

// ProfileWeight is one entry of a request mix: a profile name of Config.Model and its
// relative frequency.
type ProfileWeight struct {
	Profile string
	Weight  int
}

// Config describes a run.
type Config struct {
	// Nodes and GPUsPerNode shape the fleet; every GPU is in MIG mode.
	Nodes       int
	GPUsPerNode int
	// Model is every GPU's model; Mix names its profiles.
	Model mig.Model
	// Mix is the request mix.
	Mix []ProfileWeight
	// Requests is the length of each seed's stream. Requests arrive one per unit of
	// stream time on average (Poisson arrivals).
	Requests int
	// OfferedLoad is the memory slices the stream would hold at once if every request
	// were accepted, as a share of the fleet's memory slices (1.0: exactly full); it
	// sets the mean lifetime, in stream time units, to OfferedLoad × fleet slices ÷ the
	// mix's mean slices per request. Lifetimes are exponential.
	OfferedLoad float64
	// IdlePool keeps released instances carved and idle, for reuse by the same profile
	// or destruction when another geometry needs the slices (as raylets do before the
	// idle timeout); false destroys them at release.
	IdlePool bool
	// Seeds are the streams; results are summed over them.
	Seeds []uint64
}

// DefaultConfig is the benchmark: 8 dgx-h100 nodes (64 H100-80GB GPUs, 512 memory
// slices) offered 20% more than they hold, mostly small inference slices: 1g.10gb
// 30%, 1g.20gb 20%, 2g.20gb 20%, 3g.40gb 15%, 4g.40gb 6%, 7g.80gb 5%, 1g.10gb+me 4%
// (2.4 memory slices per request on average, mean lifetime about 260 arrivals), 6,000
// requests per stream, 5 streams, instances destroyed at release.
func DefaultConfig() Config {
	return Config{
		Nodes:       8,
		GPUsPerNode: 8,
		Model:       mig.H100_80GB,
		Mix: []ProfileWeight{
			{"1g.10gb", 30}, {"1g.20gb", 20}, {"2g.20gb", 20}, {"3g.40gb", 15},
			{"4g.40gb", 6}, {"7g.80gb", 5}, {"1g.10gb+me", 4},
		},
		Requests:    6000,
		OfferedLoad: 1.2,
		Seeds:       []uint64{1, 2, 3, 4, 5},
	}
}

// Validate checks the config.
func (c Config) Validate() error {
	switch {
	case c.Nodes < 1 || c.GPUsPerNode < 1:
		return fmt.Errorf("migsim: Nodes and GPUsPerNode must be >= 1, got %d and %d", c.Nodes, c.GPUsPerNode)
	case c.Model.Profiles() == nil:
		return fmt.Errorf("migsim: Model %q is not a MIG model", c.Model)
	case len(c.Mix) == 0:
		return errors.New("migsim: Mix must not be empty")
	case c.Requests < 1:
		return fmt.Errorf("migsim: Requests must be >= 1, got %d", c.Requests)
	case !(c.OfferedLoad > 0):
		return fmt.Errorf("migsim: OfferedLoad must be > 0, got %v", c.OfferedLoad)
	case len(c.Seeds) == 0:
		return errors.New("migsim: Seeds must not be empty")
	}
	for i, entry := range c.Mix {
		if _, ok := c.Model.Profile(entry.Profile); !ok || entry.Weight < 1 {
			return fmt.Errorf("migsim: Mix[%d]: %q with weight %d: want a %s profile and a weight >= 1", i, entry.Profile, entry.Weight, c.Model)
		}
	}
	return nil
}

// RunResult is one policy's run, summed over the seeds.
type RunResult struct {
	Policy placement.MIGPolicy
	// Requests and Accepted count requests; AcceptedSlices counts the memory slices of
	// the accepted ones.
	Requests, Accepted, AcceptedSlices int
	// AcceptedByProfile and RequestsByProfile count per profile name.
	AcceptedByProfile, RequestsByProfile map[string]int
	// Destroyed counts idle instances destroyed to make room (IdlePool only); Reused
	// the requests served by an idle instance.
	Destroyed, Reused int
	// FreeSlices and UnusableSlices are the fleet's free memory slices at the end of
	// each stream (after its last arrival), and those of them no profile could be
	// carved on (placement.MIGSliceUsage.Unusable: every placement covering the slice
	// overlaps an instance, or the GPU's compute slices, media engines or the profile's
	// max instances are used up). FragmentationPct is 100 × UnusableSlices ÷ FreeSlices
	// (0 when nothing is free).
	FreeSlices, UnusableSlices int
	FragmentationPct           float64
	// MeanFragmentationPct is the same ratio over samples taken every
	// fragmentationSampleEvery arrivals after the first mean lifetime of each stream
	// (the fleet filled): less noisy than the state at the ends.
	MeanFragmentationPct float64
	// MeanHeldFraction is the share of the fleet's memory slices held by requests,
	// averaged over the arrivals.
	MeanHeldFraction float64
}

// Result compares best fit with first fit on the same streams.
type Result struct {
	BestFit, FirstFit RunResult
	// AcceptedRatio is BestFit.Accepted ÷ FirstFit.Accepted.
	AcceptedRatio float64
}

// Run plays every seed's stream once with placement.MIGBestFit and once with
// placement.MIGFirstFit. The fleet is one list of GPUs (GPU i of node n has index
// n × GPUsPerNode + i, nodes in order), so first fit takes the first node with room,
// as a scheduler that scans nodes in order would, and best fit chooses across the
// fleet.
func Run(config Config) (Result, error) {
	if err := config.Validate(); err != nil {
		return Result{}, err
	}
	streams := make([][]request, len(config.Seeds))
	for i, seed := range config.Seeds {
		streams[i] = newStream(config, seed)
	}
	var result Result
	var err error
	if result.BestFit, err = runPolicy(config, streams, placement.MIGBestFit); err != nil {
		return Result{}, err
	}
	if result.FirstFit, err = runPolicy(config, streams, placement.MIGFirstFit); err != nil {
		return Result{}, err
	}
	if result.FirstFit.Accepted > 0 {
		result.AcceptedRatio = float64(result.BestFit.Accepted) / float64(result.FirstFit.Accepted)
	}
	return result, nil
}

// request is one MIG slice request of a stream.
type request struct {
	arrival, departure float64 // stream time
	profile            mig.Profile
}

// meanLifetime is the mean request lifetime in stream time units (see
// Config.OfferedLoad).
func meanLifetime(config Config) float64 {
	totalWeight, weightedSlices := 0, 0
	for _, entry := range config.Mix {
		profile, _ := config.Model.Profile(entry.Profile)
		totalWeight += entry.Weight
		weightedSlices += entry.Weight * profile.MemorySlices
	}
	meanSlices := float64(weightedSlices) / float64(totalWeight)
	fleetSlices := float64(config.Nodes * config.GPUsPerNode * mig.MemorySlices)
	return config.OfferedLoad * fleetSlices / meanSlices
}

func newStream(config Config, seed uint64) []request {
	rng := rand.New(rand.NewPCG(seed, 0x6d6967)) // "mig"
	totalWeight := 0
	for _, entry := range config.Mix {
		totalWeight += entry.Weight
	}
	lifetime := meanLifetime(config)
	stream := make([]request, config.Requests)
	now := 0.0
	for i := range stream {
		now += rng.ExpFloat64()
		pick := rng.IntN(totalWeight)
		var name string
		for _, entry := range config.Mix {
			if pick < entry.Weight {
				name = entry.Profile
				break
			}
			pick -= entry.Weight
		}
		profile, _ := config.Model.Profile(name)
		stream[i] = request{arrival: now, departure: now + rng.ExpFloat64()*lifetime, profile: profile}
	}
	return stream
}

// fragmentationSampleEvery is how many arrivals apart MeanFragmentationPct samples
// the fleet.
const fragmentationSampleEvery = 10

// departure is an accepted request's instance, released at its time.
type departure struct {
	at    float64
	gpu   int
	start int
}

type departures []departure

func (d departures) Len() int           { return len(d) }
func (d departures) Less(i, j int) bool { return d[i].at < d[j].at }
func (d departures) Swap(i, j int)      { d[i], d[j] = d[j], d[i] }
func (d *departures) Push(x any)        { *d = append(*d, x.(departure)) }
func (d *departures) Pop() any {
	old := *d
	last := old[len(old)-1]
	*d = old[:len(old)-1]
	return last
}

func runPolicy(config Config, streams [][]request, policy placement.MIGPolicy) (RunResult, error) {
	result := RunResult{Policy: policy, AcceptedByProfile: map[string]int{}, RequestsByProfile: map[string]int{}}
	fleetSlices := config.Nodes * config.GPUsPerNode * mig.MemorySlices
	heldFractionSum := 0.0
	sampledFree, sampledUnusable := 0, 0
	// After one mean lifetime (as many arrivals: one per time unit) the fleet is full.
	fillArrivals := int(meanLifetime(config))
	for _, stream := range streams {
		fleet := make([]placement.MIGGPU, config.Nodes*config.GPUsPerNode)
		for i := range fleet {
			fleet[i] = placement.MIGGPU{Index: i, Model: config.Model}
		}
		var pending departures
		heldSlices := 0
		for n, req := range stream {
			for pending.Len() > 0 && pending[0].at <= req.arrival {
				gone := heap.Pop(&pending).(departure)
				gpu := &fleet[gone.gpu]
				profile, err := heldProfile(*gpu, gone.start)
				if err != nil {
					return RunResult{}, err
				}
				heldSlices -= profile.MemorySlices
				if err := gpu.Release(gone.start); err != nil {
					return RunResult{}, err
				}
				if !config.IdlePool {
					if err := gpu.Destroy(gone.start); err != nil {
						return RunResult{}, err
					}
				}
			}
			result.Requests++
			result.RequestsByProfile[req.profile.Name]++
			step, err := placement.PlanMIG(fleet, req.profile.ResourceName(), policy)
			switch {
			case errors.Is(err, placement.ErrMIGNoRoom):
			case err != nil:
				return RunResult{}, err
			default:
				if err := fleet[step.GPU].Apply(step); err != nil {
					return RunResult{}, fmt.Errorf("migsim: %v: %w", step, err)
				}
				heap.Push(&pending, departure{at: req.departure, gpu: step.GPU, start: step.Start})
				heldSlices += req.profile.MemorySlices
				result.Accepted++
				result.AcceptedSlices += req.profile.MemorySlices
				result.AcceptedByProfile[req.profile.Name]++
				result.Destroyed += len(step.Destroy)
				if step.Action == placement.MIGReuseIdle {
					result.Reused++
				}
			}
			heldFractionSum += float64(heldSlices) / float64(fleetSlices)
			if n >= fillArrivals && n%fragmentationSampleEvery == 0 {
				free, unusable, err := freeSlices(fleet)
				if err != nil {
					return RunResult{}, err
				}
				sampledFree += free
				sampledUnusable += unusable
			}
		}
		free, unusable, err := freeSlices(fleet)
		if err != nil {
			return RunResult{}, err
		}
		result.FreeSlices += free
		result.UnusableSlices += unusable
	}
	result.FragmentationPct = percent(result.UnusableSlices, result.FreeSlices)
	result.MeanFragmentationPct = percent(sampledUnusable, sampledFree)
	result.MeanHeldFraction = heldFractionSum / float64(result.Requests)
	return result, nil
}

// freeSlices sums placement.MIGSliceUsage's Free and Unusable over the fleet.
func freeSlices(fleet []placement.MIGGPU) (free, unusable int, err error) {
	for _, gpu := range fleet {
		usage, err := gpu.SliceUsage()
		if err != nil {
			return 0, 0, err
		}
		free += usage.Free
		unusable += usage.Unusable
	}
	return free, unusable, nil
}

func percent(part, whole int) float64 {
	if whole == 0 {
		return 0
	}
	return 100 * float64(part) / float64(whole)
}

func heldProfile(gpu placement.MIGGPU, start int) (mig.Profile, error) {
	for _, instance := range gpu.Instances {
		if instance.Start == start && instance.State == placement.MIGHeld {
			if profile, ok := gpu.Model.ProfileByID(instance.ProfileID); ok {
				return profile, nil
			}
		}
	}
	return mig.Profile{}, fmt.Errorf("migsim: GPU %d has no held instance at %d", gpu.Index, start)
}
