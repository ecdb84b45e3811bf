package aws

import (
	"strings"
	"testing"
)

// Only a spot instance's raylet watches the instance metadata for an interruption
// notice, at the address the script read its identity from.
func TestOnlySpotUserDataWatchesForInterruptions(t *testing.T) {
	for _, spot := range []bool{false, true} {
		script, err := userData(userDataParams{ClusterName: "c1", NodeType: "h100", RequestID: "r1", GCSAddress: "10.0.0.1:6379",
			Raygo: "raygo", Resources: map[string]float64{"CPU": 4}, Spot: spot})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(script, `--spot-metadata-url "$metadata"`); got != spot {
			t.Fatalf("spot %v: the script watches for interruptions: %v\n%s", spot, got, script)
		}
	}
}
