package integration

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/internal/testutil/redisserver"
	"github.com/raygo-dev/raygo/tests/harness"
)

// Bad input: one clear line on stderr naming the flag or address, exit status 2, no
// panic, nothing left running.
func TestCLIBadInput(t *testing.T) {
	t.Parallel()
	bin := harness.Binary(t)
	deadPort := harness.FreePort(t) // nothing listens here
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	volatile := redisserver.StartWithOptions(t, redisserver.Options{Volatile: true}) // appendonly no

	cases := []struct {
		name string
		args []string
		env  []string
		want []string // substrings of stderr
	}{
		{"malformed resources JSON", []string{"start", "--head", "--block", "--port", fmt.Sprint(harness.FreePort(t)), "--resources", `{"CPU": 4`}, nil, []string{"--resources"}},
		{"resources not an object", []string{"start", "--head", "--block", "--resources", `[1,2]`}, nil, []string{"--resources"}},
		{"negative resource amount", []string{"start", "--head", "--block", "--resources", `{"TPU": -1}`}, nil, []string{`resources["TPU"]`, "-1"}},
		{"non-numeric resource amount", []string{"start", "--head", "--block", "--resources", `{"TPU": "four"}`}, nil, []string{"--resources", `"TPU"`, "number"}},
		{"CPU inside resources", []string{"start", "--head", "--block", "--resources", `{"CPU": 4}`}, nil, []string{"--num-cpus"}},
		{"negative num-cpus", []string{"start", "--head", "--block", "--num-cpus", "-2"}, nil, []string{"--num-cpus", "-2"}},
		{"non-numeric num-gpus", []string{"start", "--head", "--block", "--num-gpus", "many"}, nil, []string{"--num-gpus", "many"}},
		{"unknown store", []string{"start", "--head", "--block", "--store", "etcd"}, nil, []string{"--store", "etcd"}},
		{"unreachable redis", []string{"start", "--head", "--block", "--port", fmt.Sprint(harness.FreePort(t)), "--store", "redis", "--redis-address", fmt.Sprintf("127.0.0.1:%d", deadPort)}, nil, []string{"--redis-address", fmt.Sprintf("127.0.0.1:%d", deadPort)}},
		{"unreachable GCS on join", []string{"start", "--block", "--address", fmt.Sprintf("127.0.0.1:%d", deadPort)}, nil, []string{"--address", fmt.Sprintf("127.0.0.1:%d", deadPort)}},
		{"unreachable GCS from env", []string{"start", "--block"}, []string{fmt.Sprintf("RAYGO_ADDRESS=127.0.0.1:%d", deadPort)}, []string{fmt.Sprintf("127.0.0.1:%d", deadPort)}},
		{"GCS port in use", []string{"start", "--head", "--block", "--port", fmt.Sprint(busyPort)}, nil, []string{"--port", fmt.Sprint(busyPort)}},
		{"bad labels", []string{"start", "--head", "--block", "--labels", "zone"}, nil, []string{"--labels"}},
		{"bad log level", []string{"start", "--head", "--block", "--log-level", "chatty"}, nil, []string{"--log-level"}},
		{"status without a GCS", []string{"status", "--address", fmt.Sprintf("127.0.0.1:%d", deadPort)}, nil, []string{fmt.Sprintf("127.0.0.1:%d", deadPort)}},
		{"malformed address", []string{"list", "nodes", "--address", "nowhere"}, nil, []string{"--address", "nowhere"}},
		{"unknown list resource", []string{"list", "gpus"}, nil, []string{"gpus"}},
		{"bad list format", []string{"list", "nodes", "--format", "yaml"}, nil, []string{"--format", "yaml"}},
		{"unknown flag", []string{"start", "--hed"}, nil, []string{"hed"}},
		{"unknown command", []string{"launch"}, nil, []string{"launch"}},
		{"redis without its append-only file", []string{"start", "--head", "--block", "--port", fmt.Sprint(harness.FreePort(t)), "--store", "redis", "--redis-address", volatile.Addr},
			nil, []string{volatile.Addr, "appendonly no", "--appendonly yes --appendfsync always", "--allow-volatile-redis"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			temp := t.TempDir()
			env := append([]string{"RAYGO_TEMP_DIR=" + temp}, tc.env...)
			stdout, stderr, code := harness.Run(t, bin, tc.args, env...)
			if code != 2 {
				t.Fatalf("exit %d, want 2\nstdout: %s\nstderr: %s", code, stdout, stderr)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if len(lines) != 1 {
				t.Errorf("stderr has %d lines, want one:\n%s", len(lines), stderr)
			}
			for _, want := range tc.want {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr %q does not name %q", stderr, want)
				}
			}
			if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine") {
				t.Errorf("stderr shows a panic: %s", stderr)
			}
			// Nothing half-started: no node record, no session with a running node.
			records, _ := filepath.Glob(filepath.Join(temp, "session_*", "nodes", "*.json"))
			if len(records) > 0 {
				t.Errorf("bad input left node records: %v", records)
			}
		})
	}
}

func TestEveryCommandHasHelpWithAnExample(t *testing.T) {
	t.Parallel()
	bin := harness.Binary(t)
	for _, args := range [][]string{{"--help"}, {"start", "--help"}, {"stop", "--help"}, {"status", "--help"},
		{"list", "--help"}, {"list", "nodes", "--help"}, {"list", "placement-groups", "--help"}, {"list", "actors", "--help"},
		{"drain", "--help"}, {"debug", "--help"}, {"debug", "check-invariants", "--help"}, {"gcs-server", "--help"}, {"raylet", "--help"},
		{"auth", "--help"}, {"auth", "issue", "--help"}, {"auth", "list", "--help"}, {"auth", "revoke", "--help"}} {
		stdout, stderr, code := harness.Run(t, bin, args)
		if code != 0 {
			t.Errorf("raygo %v: exit %d: %s", args, code, stderr)
		}
		if !strings.Contains(stdout, "Example") || !strings.Contains(stdout, "raygo ") {
			t.Errorf("raygo %v: help lacks an example:\n%s", args, stdout)
		}
		if n := strings.Count(stdout, "Usage:"); n != 1 {
			t.Errorf("raygo %v: help printed %d times:\n%s", args, n, stdout)
		}
	}
	// Commands that talk to a cluster say which token scope they need.
	for _, args := range [][]string{{"status", "--help"}, {"list", "--help"}, {"list", "actors", "--help"}, {"drain", "--help"},
		{"queues", "--help"}, {"debug", "check-invariants", "--help"}, {"auth", "issue", "--help"}, {"auth", "list", "--help"}} {
		stdout, _, _ := harness.Run(t, bin, args)
		if !strings.Contains(stdout, "Token (with auth on): ") {
			t.Errorf("raygo %v: help does not say which token scope it needs:\n%s", args, stdout)
		}
	}
}

// --allow-volatile-redis runs on a Redis without its append-only file, as told.
func TestVolatileRedisRunsWhenAllowed(t *testing.T) {
	t.Parallel()
	volatile := redisserver.StartWithOptions(t, redisserver.Options{Volatile: true})
	c := harness.StartHead(t, "--store", "redis", "--redis-address", volatile.Addr, "--redis-namespace", "volatile", "--allow-volatile-redis")
	nodes, err := c.Nodes()
	if err != nil || len(nodes) != 1 {
		t.Fatalf("head on a volatile Redis: %d nodes, %v", len(nodes), err)
	}
}
