package raylet

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// metadataServer is EC2's instance metadata as far as spot notices go: IMDSv2 tokens
// (when v2), and the notice once set.
func metadataServer(t *testing.T, v2 bool, notice *atomic.Value) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token" && v2:
			w.Write([]byte("token-1"))
		case r.Method == http.MethodGet && r.URL.Path == "/latest/meta-data/spot/instance-action":
			if v2 && r.Header.Get("X-aws-ec2-metadata-token") != "token-1" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			body, _ := notice.Load().(string)
			if body == "" {
				http.NotFound(w, r)
				return
			}
			w.Write([]byte(body))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestFetchSpotNotice(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		var notice atomic.Value
		srv := metadataServer(t, v2, &notice)
		ctx := context.Background()
		if _, err := fetchSpotNotice(ctx, srv.Client(), srv.URL); !errors.Is(err, errNoNotice) {
			t.Fatalf("v2=%v no notice: %v, want errNoNotice", v2, err)
		}
		notice.Store(`{"action": "terminate", "time": "2026-11-26T15:00:00Z"}`)
		got, err := fetchSpotNotice(ctx, srv.Client(), srv.URL+"/")
		if err != nil {
			t.Fatalf("v2=%v notice: %v", v2, err)
		}
		if got.Action != "terminate" || !got.Time.Equal(time.Date(2026, 11, 26, 15, 0, 0, 0, time.UTC)) {
			t.Fatalf("v2=%v notice %+v", v2, got)
		}
		notice.Store(`{"action": "terminate"}`)
		if _, err := fetchSpotNotice(ctx, srv.Client(), srv.URL); err == nil || errors.Is(err, errNoNotice) {
			t.Fatalf("v2=%v a notice without time: %v, want an error", v2, err)
		}
	}
}
