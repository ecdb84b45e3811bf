package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/testutil/tlscerts"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/tests/harness"
)

// With RAYGO_USE_TLS=1 the dashboard port (the page, /api/v0 and /metrics) speaks only
// HTTPS with the cluster's certificate: a plaintext request gets only a 400, an HTTPS one
// checked against the CA is served with the token and refused without it, and `raygo
// status` still reads the head's /metrics.
func TestWithTLSTheDashboardServesOnlyHTTPS(t *testing.T) {
	certs, err := tlscerts.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range certs.Env() {
		name, value, _ := strings.Cut(kv, "=")
		t.Setenv(name, value)
	}
	c, token := startAuthHead(t, certs.Env(), "--num-cpus", "2", "--dashboard-port", "0")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	info, err := pb.NewNodeInfoServiceClient(dialWith(t, c.GCSAddress, token)).GetClusterInfo(ctx, &pb.GetClusterInfoRequest{})
	if err != nil || info.DashboardAddress == "" {
		t.Fatalf("GetClusterInfo over TLS: %v %v; want the dashboard's address", info, err)
	}

	pem, err := os.ReadFile(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	secure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	plain := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	get := func(client *http.Client, url, token string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	for _, path := range []string{"/metrics", "/api/v0/nodes"} {
		if code, body, err := get(secure, "https://"+info.DashboardAddress+path, token); err != nil || code != http.StatusOK {
			t.Errorf("HTTPS %s with the token: %d %.200s %v; want 200", path, code, body, err)
		}
		if code, _, err := get(secure, "https://"+info.DashboardAddress+path, ""); err != nil || code != http.StatusUnauthorized {
			t.Errorf("HTTPS %s without the token: %d %v; want 401", path, code, err)
		}
		if code, body, err := get(plain, "http://"+info.DashboardAddress+path, token); err == nil && code != http.StatusBadRequest {
			t.Errorf("plaintext %s: %d %.200s; want no answer or 400", path, code, body)
		}
	}
	stdout, stderr, code := harness.Run(t, c.Bin, []string{"status", "--address", c.GCSAddress}, "RAYGO_AUTH_TOKEN="+token)
	if code != 0 || strings.Contains(stdout, "not available") {
		t.Errorf("raygo status over TLS: exit %d, %s %s; want it to read /metrics", code, stdout, stderr)
	}
}
