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

// With a node token, the user data writes it owner-only to NodeTokenPath and points
// RAYGO_AUTH_TOKEN_PATH at it before raygo start; without one, it carries no token.
func TestUserDataCarriesTheNodeTokenInAFileForRaygoStart(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, nodeToken := range []string{token, ""} {
		script, err := userData(userDataParams{ClusterName: "c1", NodeType: "h100", RequestID: "r1", GCSAddress: "10.0.0.1:6379",
			Raygo: "raygo", Resources: map[string]float64{"CPU": 4}, NodeToken: nodeToken})
		if err != nil {
			t.Fatal(err)
		}
		exec := strings.Index(script, "\nexec ")
		if nodeToken == "" {
			if strings.Contains(script, "RAYGO_AUTH_TOKEN") || strings.Contains(script, NodeTokenPath) {
				t.Fatalf("no node token, yet the script sets one:\n%s", script)
			}
			continue
		}
		for _, want := range []string{"umask 077\n", "printf '%s\\n' '" + token + "' > '" + NodeTokenPath + "'\n",
			"export RAYGO_AUTH_TOKEN_PATH='" + NodeTokenPath + "'\n"} {
			if at := strings.Index(script, want); at < 0 || at > exec {
				t.Fatalf("the script lacks %q before raygo start:\n%s", want, script)
			}
		}
		if strings.Count(script, token) != 1 || strings.Contains(script[exec:], token) {
			t.Fatalf("the token is elsewhere than in the file it writes (on raygo start's command line?):\n%s", script)
		}
	}
}
