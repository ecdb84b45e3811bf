package integration

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/internal/testutil/redisserver"
	"github.com/raygo-dev/raygo/tests/harness"
)

// The Redis password never appears on a daemon's command line, where any local user
// reads it (ps, /proc/<pid>/cmdline): the GCS gets it through its environment, whether
// it was given as RAYGO_REDIS_PASSWORD or as --redis-password to start (before, start
// passed --redis-password on to the GCS).
func TestTheRedisPasswordIsNotOnTheGCSCommandLine(t *testing.T) {
	t.Parallel()
	const password = "redis-s3cret-password"
	redis := redisserver.StartWithOptions(t, redisserver.Options{Password: password})
	for _, tc := range []struct {
		name  string
		env   []string
		extra []string
	}{
		{"RAYGO_REDIS_PASSWORD", []string{"RAYGO_REDIS_PASSWORD=" + password}, nil},
		{"--redis-password", nil, []string{"--redis-password", password}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--store", "redis", "--redis-address", redis.Addr, "--redis-namespace", "pw-" + strings.TrimPrefix(tc.name, "--")}, tc.extra...)
			c := harness.StartHeadWithEnv(t, tc.env, args...) // up: the GCS reached Redis with the password
			record := c.Head.ReadRecord(t)
			for name, pid := range map[string]int{"GCS": record.GCSPID, "raylet": record.RayletPID} {
				cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(cmdline), password) {
					t.Fatalf("the %s's command line holds the Redis password: %q", name, strings.ReplaceAll(string(cmdline), "\x00", " "))
				}
			}
		})
	}
}
