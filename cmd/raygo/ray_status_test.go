package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// TestRayStatusMatchesRaysFormatter: for each scenario in testdata/status (an idle
// cluster, a busy one, pending demand, failures), raygo's text is the one Ray 2.60's own
// formatter printed for the same state (the .golden beside it, written by
// tests/compat/status_golden.py in UTC), and with -v the .verbose.golden.
func TestRayStatusMatchesRaysFormatter(t *testing.T) {
	utc := time.Local
	time.Local = time.UTC
	defer func() { time.Local = utc }()
	scenarios, err := filepath.Glob("testdata/status/*.json")
	if err != nil || len(scenarios) < 4 {
		t.Fatalf("scenarios: %v, %d", err, len(scenarios))
	}
	for _, path := range scenarios {
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var scenario struct {
				Now   float64         `json:"now"`
				Reply json.RawMessage `json:"reply"`
			}
			if err := json.Unmarshal(raw, &scenario); err != nil {
				t.Fatal(err)
			}
			var reply pb.GetClusterStatusReply
			if err := protojson.Unmarshal(scenario.Reply, &reply); err != nil {
				t.Fatal(err)
			}
			sec, frac := math.Modf(scenario.Now)
			now := time.Unix(int64(sec), int64(math.Round(frac*1e6))*1000)
			for _, verbose := range []bool{false, true} {
				golden := strings.TrimSuffix(path, ".json") + ".golden"
				if verbose {
					golden = strings.TrimSuffix(path, ".json") + ".verbose.golden"
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatal(err)
				}
				if got := formatRayStatus(&reply, now, verbose) + "\n"; got != string(want) {
					t.Fatalf("verbose %v: raygo's text differs from Ray's:\n--- raygo\n%s--- Ray\n%s", verbose, got, want)
				}
			}
		})
	}
}

func TestPythonFloatIsPythonsRepr(t *testing.T) {
	for v, want := range map[float64]string{0: "0.0", 1: "1.0", 0.5: "0.5", 10.5: "10.5", 1e16: "1e+16", 1.5e-5: "1.5e-05",
		0.0001: "0.0001", 123456789012345.0: "123456789012345.0", 1.0 / 3: "0.3333333333333333", -2: "-2.0"} {
		if got := pythonFloat(v); got != want {
			t.Errorf("pythonFloat(%v) = %q, want %q", v, got, want)
		}
	}
}
