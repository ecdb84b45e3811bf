package pprofserve

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestServesTheProfilerOnLoopbackOnly(t *testing.T) {
	addr, err := Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine profile") {
		t.Fatalf("goroutine profile: %d %.200s", resp.StatusCode, body)
	}
	for _, bad := range []string{"0.0.0.0:0", "10.1.2.3:6060", "6060"} {
		if _, err := Start(bad); err == nil || !strings.Contains(err.Error(), "--pprof") {
			t.Fatalf("Start(%q): %v, want a refusal naming --pprof", bad, err)
		}
	}
}
