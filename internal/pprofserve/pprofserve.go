// Package pprofserve serves Go's profiler (net/http/pprof) on a loopback address, for
// the GCS and raylets when asked with --pprof: `go tool pprof
// http://127.0.0.1:6060/debug/pprof/profile?seconds=30`.
package pprofserve

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// CheckAddress reports whether addr is a loopback HOST:PORT; flag names it in the error.
func CheckAddress(flag, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: want HOST:PORT: %w", flag, addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%s %q: only a loopback address (127.0.0.1, ::1, localhost) may serve the profiler", flag, addr)
	}
	return nil
}

// Start listens on addr (HOST:PORT, loopback only: a profile shows memory and code) and
// serves /debug/pprof/ until the process exits. It returns the address it listens on.
func Start(addr string) (string, error) {
	if err := CheckAddress("--pprof", addr); err != nil {
		return "", err
	}
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("--pprof %q: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	server := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = server.Serve(listener) }()
	return listener.Addr().String(), nil
}
