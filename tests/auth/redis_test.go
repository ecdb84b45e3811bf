package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/raygo-dev/raygo/internal/testutil/redisserver"
	"github.com/raygo-dev/raygo/internal/testutil/tlscerts"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/tests/harness"
)

// The GCS reaches a Redis that serves only TLS (client certificates required) and only
// an ACL user: with the user (--redis-username), its password (RAYGO_REDIS_PASSWORD) and
// the --redis-tls-* files it keeps its tables there; without TLS, without the client
// certificate, or with the wrong password it does not start, and the password is on no
// command line and in no log.
func TestTheGCSReachesRedisAsAnACLUserOverTLS(t *testing.T) {
	const user, password = "raygo-gcs", "redis-acl-s3cret"
	certs, err := tlscerts.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	server := redisserver.StartWithOptions(t, redisserver.Options{User: user, Password: password,
		TLS: &redisserver.TLSFiles{CA: certs.CA, Cert: certs.Cert, Key: certs.Key}})
	bin := harness.Binary(t)

	// Refused: each run is a GCS in the foreground that must exit naming Redis.
	base := []string{"gcs-server", "--port", strconv.Itoa(harness.FreePort(t)), "--dashboard-port", "-1",
		"--store", "redis", "--redis-address", server.Addr, "--redis-namespace", "acl-tls", "--redis-username", user}
	tlsFlags := []string{"--redis-tls-ca-cert", certs.CA, "--redis-tls-cert", certs.Cert, "--redis-tls-key", certs.Key}
	for _, tc := range []struct {
		name  string
		flags []string
		env   string
	}{
		{"plaintext", nil, "RAYGO_REDIS_PASSWORD=" + password},
		{"TLS without the client certificate", []string{"--redis-tls-ca-cert", certs.CA}, "RAYGO_REDIS_PASSWORD=" + password},
		{"the wrong password", tlsFlags, "RAYGO_REDIS_PASSWORD=not-the-password"},
	} {
		_, stderr, code := harness.Run(t, bin, append(append([]string{}, base...), tc.flags...), tc.env)
		if code == 0 || !strings.Contains(stderr, server.Addr) {
			t.Errorf("a GCS reaching Redis with %s: exit %d, %s; want a refusal naming %s", tc.name, code, stderr, server.Addr)
		}
		if strings.Contains(stderr, password) {
			t.Errorf("a GCS reaching Redis with %s printed the password: %s", tc.name, stderr)
		}
	}
	_, stderr, code := harness.Run(t, bin, append(append([]string{}, base...), "--redis-tls-cert", certs.Cert), "RAYGO_REDIS_PASSWORD="+password)
	if code == 0 || !strings.Contains(stderr, "--redis-tls-key") {
		t.Errorf("--redis-tls-cert without --redis-tls-key: exit %d, %s; want bad input naming --redis-tls-key", code, stderr)
	}

	c := harness.StartHeadWithEnv(t, []string{"RAYGO_REDIS_PASSWORD=" + password}, append([]string{"--num-cpus", "2",
		"--store", "redis", "--redis-address", server.Addr, "--redis-namespace", "acl-tls", "--redis-username", user}, tlsFlags...)...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := harness.DialPlacementGroups(t, c.GCSAddress).CreatePlacementGroup(ctx, &pb.CreatePlacementGroupRequest{
		Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{{Resources: map[string]float64{"CPU": 1}}}, Strategy: "PACK", Lifetime: "detached"}); err != nil {
		t.Fatal(err)
	}

	// The tables are in that Redis, read as the same user over TLS.
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(certs.CA)
	if err != nil || !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("CA %s: %v", certs.CA, err)
	}
	cert, err := tls.LoadX509KeyPair(certs.Cert, certs.Key)
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(&redis.Options{Addr: server.Addr, Username: user, Password: password,
		TLSConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}})
	defer client.Close()
	keys, err := client.Keys(ctx, "acl-tls:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("the GCS's keys in Redis: %v %v; want its tables under acl-tls:", keys, err)
	}
	groups, err := client.HLen(ctx, "acl-tls:placement_groups").Result()
	if err != nil || groups != 1 {
		t.Errorf("groups in Redis: %d %v; want the one created (keys %v)", groups, err, keys)
	}

	record := c.Head.ReadRecord(t)
	for name, pid := range map[string]int{"GCS": record.GCSPID, "raylet": record.RayletPID, "supervisor": record.SupervisorPID} {
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(cmdline), password) {
			t.Errorf("the %s's command line holds the Redis password", name)
		}
	}
	logs, err := filepath.Glob(filepath.Join(record.LogDir, "*"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("logs in %s: %v %v", record.LogDir, logs, err)
	}
	for _, path := range logs {
		if raw, err := os.ReadFile(path); err == nil && strings.Contains(string(raw), password) {
			t.Errorf("%s holds the Redis password", path)
		}
	}
}
