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
	"github.com/rs/zerolog"

	"github.com/raygo-dev/raygo/internal/auth"
)

// Server is a running /metrics endpoint.
type Server struct {
	http *http.Server
	addr string
}

// Serve serves registry at /metrics on address (HOST:PORT; port 0 picks a free one). With
// a token and a host that is not loopback, a scrape must carry it (Authorization:
// Bearer). An empty address serves nothing; one that cannot be bound is a warning in log,
// not a failure (as Ray's dashboard): both return nil, whose methods do nothing.
func Serve(address string, registry *prometheus.Registry, token string, log zerolog.Logger) *Server {
	if address == "" {
		return nil
	}
	listener, err := net.Listen("tcp", address)
	if err != nil {
		log.Warn().Err(err).Str("address", address).Msg("metrics port unavailable: no /metrics")
		return nil
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
		if err := s.http.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn().Err(err).Msg("/metrics stopped")
		}
	}()
	log.Info().Str("address", s.addr).Msg("serving /metrics")
	return s
}

// Address is the host:port it serves on ("" for nil).
func (s *Server) Address() string {
	if s == nil {
		return ""
	}
	return s.addr
}

// Close stops serving (nothing for nil).
func (s *Server) Close() {
	if s != nil {
		_ = s.http.Close()
	}
}
