package placement_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

func TestParseRequestValid(t *testing.T) {
	request, err := placement.ParseRequest(placement.RequestSpec{
		Bundles:             []map[string]float64{{"GPU": 1, "CPU": 4}, {"GPU": 0.5, "CPU": 0}},
		Strategy:            "STRICT_SPREAD",
		BundleLabelSelector: []map[string]string{{"zone": "in(a,b)"}, {}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if request.Strategy != placement.StrategyStrictSpread || len(request.Bundles) != 2 ||
		!request.Bundles[1].Equal(parseResources("GPU=0.5")) || request.BundleLabelSelectors[0].String() != "{zone: in(a,b)}" {
		t.Fatalf("unexpected request %+v", request)
	}
	if request, err := placement.ParseRequest(placement.RequestSpec{Bundles: []map[string]float64{{"CPU": 1}}}); err != nil || request.Strategy != placement.StrategyPack {
		t.Fatalf("an empty strategy is PACK, Ray's default: %v %v", request.Strategy, err)
	}
	if request, err := placement.ParseRequest(placement.RequestSpec{Bundles: []map[string]float64{{"GPU": 4}}, Topology: "node"}); err != nil || request.Topology != placement.TopologyNode {
		t.Fatalf("topology node: %v %v", request.Topology, err)
	}
}

func TestParseRequestErrorsNameTheField(t *testing.T) {
	gpu := func(n int) []map[string]float64 {
		out := make([]map[string]float64, n)
		for i := range out {
			out[i] = map[string]float64{"GPU": 1}
		}
		return out
	}
	cases := []struct {
		name     string
		spec     placement.RequestSpec
		sentinel error
		want     string
	}{
		{"no bundles", placement.RequestSpec{}, placement.ErrNoBundles,
			"bundles: must be a non-empty list"},
		{"too many bundles", placement.RequestSpec{Bundles: gpu(10001)}, placement.ErrTooManyBundles,
			"bundles: at most 10000 bundles are allowed, got 10001"},
		{"empty bundle", placement.RequestSpec{Bundles: []map[string]float64{{"GPU": 1}, {"CPU": 1}, {}}}, resources.ErrEmptyBundle,
			"bundles[2]: a bundle must request at least one resource with a positive amount"},
		{"all-zero bundle", placement.RequestSpec{Bundles: []map[string]float64{{"GPU": 0, "CPU": 0}}}, resources.ErrEmptyBundle,
			"bundles[0]: a bundle must request at least one resource with a positive amount"},
		{"rounds to zero", placement.RequestSpec{Bundles: []map[string]float64{{"GPU": 0.00001}}}, resources.ErrEmptyBundle,
			"bundles[0]: a bundle must request at least one resource with a positive amount"},
		{"negative", placement.RequestSpec{Bundles: []map[string]float64{{"GPU": -1}}}, resources.ErrInvalidAmount,
			`bundles[0]["GPU"]: amount must be a finite number >= 0, got -1`},
		{"NaN", placement.RequestSpec{Bundles: []map[string]float64{{"CPU": 1}, {"CPU": math.NaN()}}}, resources.ErrInvalidAmount,
			`bundles[1]["CPU"]: amount must be a finite number >= 0, got NaN`},
		{"infinite", placement.RequestSpec{Bundles: []map[string]float64{{"CPU": math.Inf(1)}}}, resources.ErrInvalidAmount,
			`bundles[0]["CPU"]: amount must be a finite number >= 0, got +Inf`},
		{"empty name", placement.RequestSpec{Bundles: []map[string]float64{{"": 1}}}, resources.ErrInvalidResourceName,
			`bundles[0][""]: resource name must not be empty`},
		{"long name", placement.RequestSpec{Bundles: []map[string]float64{{strings.Repeat("x", 257): 1}}}, resources.ErrInvalidResourceName,
			`bundles[0]["xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…"]: resource name must be at most 256 bytes, got 257`},
		{"unknown strategy", placement.RequestSpec{Bundles: gpu(1), Strategy: "FOO"}, placement.ErrUnknownStrategy,
			`strategy: must be one of PACK, SPREAD, STRICT_PACK, STRICT_SPREAD, got "FOO"`},
		{"lowercase strategy", placement.RequestSpec{Bundles: gpu(1), Strategy: "pack"}, placement.ErrUnknownStrategy,
			`strategy: must be one of PACK, SPREAD, STRICT_PACK, STRICT_SPREAD, got "pack"`},
		{"selector count", placement.RequestSpec{Bundles: gpu(2), BundleLabelSelector: []map[string]string{{"zone": "a"}}}, nodelabel.ErrInvalidSelector,
			"bundle_label_selector: must have one entry per bundle (2), got 1"},
		{"malformed selector", placement.RequestSpec{Bundles: gpu(2), BundleLabelSelector: []map[string]string{{}, {"zone": "in(a,)"}}}, nodelabel.ErrInvalidSelector,
			`bundle_label_selector[1]["zone"]: malformed selector value "in(a,)": values must not be empty`},
		{"fractional GPUs above one", placement.RequestSpec{Bundles: []map[string]float64{{"GPU": 0.5}, {"GPU": 2.25}}}, resources.ErrFractionalGPUs,
			`bundles[1]["GPU"]: GPU amounts above 1 must be whole numbers (a fraction of one GPU, or whole GPUs), got 2.25`},
		{"unknown topology", placement.RequestSpec{Bundles: gpu(1), Topology: "island"}, placement.ErrUnknownTopology,
			`topology: must be "" (GPU topology) or "node" (nodes alone), got "island"`},
		// Each amount is allowed; their int64 sum wrapped to a negative total that fit a
		// 0-CPU node and stopped all scheduling.
		{"sum past the largest amount", placement.RequestSpec{Bundles: []map[string]float64{{"CPU": 922337203685476}, {"CPU": 1e6}}}, resources.ErrInvalidAmount,
			`bundles["CPU"]: the total over all bundles must be at most 922337203685476, got more`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := placement.ParseRequest(c.spec)
			if err == nil || err.Error() != c.want {
				t.Fatalf("error = %v\nwant    %s", err, c.want)
			}
			if !errors.Is(err, c.sentinel) || !errors.Is(err, placement.ErrInvalidRequest) {
				t.Errorf("error does not wrap %v and ErrInvalidRequest", c.sentinel)
			}
			var fieldErr *fielderr.Error
			if !errors.As(err, &fieldErr) || fieldErr.Field == "" {
				t.Errorf("error is not a *fielderr.Error with a field: %#v", err)
			}
		})
	}
}

func TestRequestValidate(t *testing.T) {
	valid := placement.Request{Bundles: bundles("GPU=1", "GPU=1")}
	cases := []struct {
		name   string
		modify func(*placement.Request)
		want   string
	}{
		{"valid", func(*placement.Request) {}, ""},
		{"negative amount", func(r *placement.Request) { r.Bundles = []resources.Set{{"GPU": -10000}} },
			`bundles[0]["GPU"]: amount must be a finite number >= 0, got -1`},
		{"unknown strategy", func(r *placement.Request) { r.Strategy = "FOO" },
			`strategy: must be one of PACK, SPREAD, STRICT_PACK, STRICT_SPREAD, got "FOO"`},
		{"selector without values", func(r *placement.Request) {
			r.BundleLabelSelectors = []nodelabel.Selector{nil, {{Key: "zone"}}}
		}, `bundle_label_selector[1]["zone"]: selector has no values`},
		{"placed index out of range", func(r *placement.Request) { r.PlacedBundles = map[int]placement.NodeID{2: "n1"} },
			"placed_bundles[2]: bundle index out of range, the group has 2 bundles"},
		{"placed on empty node", func(r *placement.Request) { r.PlacedBundles = map[int]placement.NodeID{0: ""} },
			"placed_bundles[0]: node id must not be empty"},
		{"strict spread sharing", func(r *placement.Request) {
			r.Strategy = placement.StrategyStrictSpread
			r.PlacedBundles = map[int]placement.NodeID{0: "n1", 1: "n1"}
		}, "placed_bundles[1]: STRICT_SPREAD bundles must be on distinct nodes, bundle 0 is also on node n1"},
		{"strict pack split, one-node topology", func(r *placement.Request) {
			r.Strategy = placement.StrategyStrictPack
			r.Topology = placement.TopologyNode
			r.PlacedBundles = map[int]placement.NodeID{0: "n1", 1: "n2"}
		}, "placed_bundles[1]: STRICT_PACK bundles must share one node, bundle 0 is on node n1 and this one on node n2"},
		{"unknown topology", func(r *placement.Request) { r.Topology = "rack" },
			`topology: must be "" (GPU topology) or "node" (nodes alone), got "rack"`},
		{"GPU amount above 1 not whole", func(r *placement.Request) { r.Bundles[1] = parseResources("GPU=1.5") },
			`bundles[1]["GPU"]: GPU amounts above 1 must be whole numbers (a fraction of one GPU, or whole GPUs), got 1.5`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			request := valid
			request.Bundles = append([]resources.Set(nil), valid.Bundles...)
			c.modify(&request)
			err := request.Validate()
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || err.Error() != c.want {
				t.Fatalf("error = %v\nwant    %s", err, c.want)
			}
			if !errors.Is(err, placement.ErrInvalidRequest) {
				t.Error("error does not wrap ErrInvalidRequest")
			}
			// Schedule refuses the same request with the same error.
			_, scheduleErr := placement.Schedule(snapshotOf(t, node("n1", "GPU=8", "")), request)
			if scheduleErr == nil || scheduleErr.Error() != c.want {
				t.Errorf("Schedule error = %v", scheduleErr)
			}
		})
	}
}
