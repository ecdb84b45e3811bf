// Package metricsserver serves a Prometheus registry's /metrics over HTTP for the GCS
// (the dashboard port) and the raylets (--metrics-export-port): one handler, and the
// cluster token required when auth is on and the address is not loopback.
package metricsserver

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/raygo-dev/raygo/internal/auth"
)

// Server is a running /metrics endpoint.
type Server struct {
	http *http.Server
	addr string
}

// Start listens on address (HOST:PORT; port 0 picks a free one) and serves registry at
// /metrics. With a token and a host that is not loopback, a scrape must carry it
// (Authorization: Bearer). Serving errors after the start go to onError.
func Start(address string, registry *prometheus.Registry, token string, onError func(error)) (*Server, error) {
	listener, err := net.Listen("tcp", address)
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(address)
	needToken := token != "" && !auth.IsLoopback(host)
	metrics := promhttp.HandlerFor(registry, promhttp.HandlerOpts{})
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		if needToken && !auth.Equal(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), token) {
			http.Error(w, "this raygo cluster requires its token: "+auth.Hint, http.StatusUnauthorized)
			return
		}
		metrics.ServeHTTP(w, r)
	})
	s := &Server{http: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, addr: listener.Addr().String()}
	go func() {
		if err := s.http.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) && onError != nil {
			onError(err)
		}
	}()
	return s, nil
}

// Address is the host:port it serves on.
func (s *Server) Address() string { return s.addr }

// Close stops serving.
func (s *Server) Close() { _ = s.http.Close() }
