package rpcutil

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// TLS between every raygo process, as Ray's (RAY_USE_TLS and friends, with RAYGO_):
// mutual TLS, each process presenting the one certificate and key as server and as
// client, each verifying the other against the CA.
const (
	EnvUseTLS        = "RAYGO_USE_TLS"
	EnvTLSServerCert = "RAYGO_TLS_SERVER_CERT"
	EnvTLSServerKey  = "RAYGO_TLS_SERVER_KEY"
	EnvTLSCACert     = "RAYGO_TLS_CA_CERT"
)

// tlsFiles reads the TLS settings of the environment: nil when RAYGO_USE_TLS is not
// 1/true, an error naming the variable when one is missing or a file is unusable.
func tlsFiles() (*tls.Certificate, *x509.CertPool, error) {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(EnvUseTLS))) {
	case "", "0", "false":
		return nil, nil, nil
	case "1", "true":
	default:
		return nil, nil, fmt.Errorf("%s=%q: must be 1 or 0", EnvUseTLS, os.Getenv(EnvUseTLS))
	}
	paths := map[string]string{}
	for _, name := range []string{EnvTLSServerCert, EnvTLSServerKey, EnvTLSCACert} {
		if paths[name] = os.Getenv(name); paths[name] == "" {
			return nil, nil, fmt.Errorf("%s=1 needs %s, %s and %s: %s is not set", EnvUseTLS, EnvTLSServerCert, EnvTLSServerKey, EnvTLSCACert, name)
		}
	}
	cert, err := tls.LoadX509KeyPair(paths[EnvTLSServerCert], paths[EnvTLSServerKey])
	if err != nil {
		return nil, nil, fmt.Errorf("%s / %s: %w", EnvTLSServerCert, EnvTLSServerKey, err)
	}
	pem, err := os.ReadFile(paths[EnvTLSCACert])
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", EnvTLSCACert, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("%s=%s: no PEM certificate in it", EnvTLSCACert, paths[EnvTLSCACert])
	}
	return &cert, pool, nil
}

// ServerTLS returns the server option of TLS from the environment: none when
// RAYGO_USE_TLS is off; with it, mutual TLS that refuses plaintext clients and clients
// without a certificate the CA signed.
func ServerTLS() ([]grpc.ServerOption, error) {
	cert, pool, err := tlsFiles()
	if err != nil || cert == nil {
		return nil, err
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{*cert},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}))}, nil
}

// HTTPServerTLS is the TLS of an HTTP port (the dashboard's, a raylet's /metrics) from
// the environment: nil when RAYGO_USE_TLS is off. It serves the same certificate and
// checks a client certificate against the CA when one is presented; it does not require
// one, so a browser without it reaches the page (the token still decides who is served).
func HTTPServerTLS() (*tls.Config, error) {
	cert, pool, err := tlsFiles()
	if err != nil || cert == nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{*cert},
		ClientCAs:    pool,
		ClientAuth:   tls.VerifyClientCertIfGiven,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// HTTPClientTLS is the client side of HTTPServerTLS: nil when RAYGO_USE_TLS is off.
func HTTPClientTLS() (*tls.Config, error) {
	cert, pool, err := tlsFiles()
	if err != nil || cert == nil {
		return nil, err
	}
	return clientTLSConfig(cert, pool), nil
}

func clientTLSConfig(cert *tls.Certificate, pool *x509.CertPool) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{*cert},
		RootCAs:      pool,
		MinVersion:   tls.VersionTLS12,
	}
}

// clientTransport returns the transport credentials of Dial: TLS with the certificate
// and CA of the environment, else none (nil).
func clientTransport() (credentials.TransportCredentials, error) {
	cert, pool, err := tlsFiles()
	if err != nil || cert == nil {
		return nil, err
	}
	return credentials.NewTLS(clientTLSConfig(cert, pool)), nil
}
