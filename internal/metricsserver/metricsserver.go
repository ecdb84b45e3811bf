// Package metricsserver serves a Prometheus registry's /metrics over HTTP for the GCS
// (the dashboard port, with the dashboard beside it) and the raylets
// (--metrics-export-port): one server, and the cluster token required on every path
// when auth is on; HTTPS only with RAYGO_USE_TLS=1 (rpcutil.HTTPServerTLS).
package metricsserver

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/raygo-dev/raygo/internal/auth"
	"github.com/raygo-dev/raygo/internal/rpcutil"
)

// TokenCookie is the cookie a browser keeps the cluster token in, once it opened a page
// with ?token=.
const TokenCookie = "raygo_token"

// Server is a running /metrics endpoint.
type Server struct {
	http *http.Server
	addr string
}

// Serve serves registry at /metrics on address (HOST:PORT; port 0 picks a free one). With
// a token, every request must carry it (see RequireToken). An empty address serves
// nothing; one that cannot be bound is a warning in log, not a failure (as Ray's
// dashboard): both return nil, whose methods do nothing.
func Serve(address string, registry *prometheus.Registry, token string, log zerolog.Logger) *Server {
	return ServeWith(address, registry, token, log, nil)
}

// ServeWith is Serve with app answering every path but /metrics (nil: none), behind
// the same token.
func ServeWith(address string, registry *prometheus.Registry, token string, log zerolog.Logger, app http.Handler) *Server {
	return ServeVerified(address, registry, auth.ClusterToken(token), log, app)
}

// ServeVerified is ServeWith with verify deciding which tokens are let in (RequireVerified):
// app finds the request's scope in its context (auth.ScopeFrom). /metrics, which shows
// every queue and node, needs an admin or node token.
func ServeVerified(address string, registry *prometheus.Registry, verify auth.Verifier, log zerolog.Logger, app http.Handler) *Server {
	if address == "" {
		return nil
	}
	// With RAYGO_USE_TLS=1 the port speaks only TLS; settings that do not load serve
	// nothing rather than plaintext (the gRPC servers refuse to start on them anyway).
	tlsConfig, err := rpcutil.HTTPServerTLS()
	if err != nil {
		log.Warn().Err(err).Str("address", address).Msg("TLS settings unusable: no /metrics")
		return nil
	}
	listener, err := net.Listen("tcp", address)
	if err != nil {
		log.Warn().Err(err).Str("address", address).Msg("metrics port unavailable: no /metrics")
		return nil
	}
	if tlsConfig != nil {
		listener = tls.NewListener(listener, tlsConfig)
	}
	mux := http.NewServeMux()
	metrics := promhttp.HandlerFor(registry, promhttp.HandlerOpts{})
	mux.Handle("/metrics", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if auth.ScopeFrom(r.Context()).IsTenant() {
			http.Error(w, "/metrics needs an admin or node token", http.StatusForbidden)
			return
		}
		metrics.ServeHTTP(w, r)
	}))
	if app != nil {
		mux.Handle("/", app)
	}
	s := &Server{http: &http.Server{Handler: RequireVerified(verify, mux), ReadHeaderTimeout: 10 * time.Second}, addr: listener.Addr().String()}
	go func() {
		if err := s.http.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn().Err(err).Msg("/metrics stopped")
		}
	}()
	log.Info().Str("address", s.addr).Msg("serving /metrics")
	return s
}

// RequireToken lets through only requests that carry token (all of them when token is
// ""): see RequireVerified.
func RequireToken(token string, next http.Handler) http.Handler {
	return RequireVerified(auth.ClusterToken(token), next)
}

// RequireVerified lets through only requests whose token verify accepts (all of them
// when verify is nil), with its scope in the request's context (auth.WithScope): as
// `Authorization: Bearer <token>` (scrapers, scripts), as the TokenCookie, or once as
// `?token=<token>`, which sets the cookie (HttpOnly, SameSite=Strict) and, for a GET,
// redirects to the same URL without the token, so it stays out of the address bar and
// the browser's history.
func RequireVerified(verify auth.Verifier, next http.Handler) http.Handler {
	if verify == nil {
		return next
	}
	serve := func(w http.ResponseWriter, r *http.Request, scope auth.Scope) {
		next.ServeHTTP(w, r.WithContext(auth.WithScope(r.Context(), scope)))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			if scope, ok := verify(bearer); ok {
				serve(w, r, scope)
				return
			}
		}
		if query := r.URL.Query(); query.Has("token") {
			token := query.Get("token")
			scope, ok := verify(token)
			if !ok {
				refuse(w)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: TokenCookie, Value: token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				query.Del("token")
				clean := *r.URL
				clean.RawQuery = query.Encode()
				http.Redirect(w, r, clean.RequestURI(), http.StatusSeeOther)
				return
			}
			serve(w, r, scope)
			return
		}
		if cookie, err := r.Cookie(TokenCookie); err == nil {
			if scope, ok := verify(cookie.Value); ok {
				serve(w, r, scope)
				return
			}
		}
		refuse(w)
	})
}

func refuse(w http.ResponseWriter) {
	http.Error(w, "this raygo cluster requires its token (Authorization: Bearer <token>; in a browser, open the page once with ?token=<token>): "+auth.Hint, http.StatusUnauthorized)
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
