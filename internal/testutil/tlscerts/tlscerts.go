// Package tlscerts makes a throwaway certificate authority and one certificate it signed
// for loopback (127.0.0.1, ::1, localhost), for tests of raygo's mutual TLS: every
// process presents that certificate as server and client, as Ray's TLS does.
package tlscerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Files are the PEM files Write made.
type Files struct {
	CA, Cert, Key string
}

// Env returns the environment that turns raygo's TLS on with these files.
func (f Files) Env() []string {
	return []string{"RAYGO_USE_TLS=1", "RAYGO_TLS_SERVER_CERT=" + f.Cert, "RAYGO_TLS_SERVER_KEY=" + f.Key, "RAYGO_TLS_CA_CERT=" + f.CA}
}

// Write makes a CA and a certificate for loopback signed by it, valid for a day, into
// dir (ca.pem, cert.pem, key.pem; the key owner-only).
func Write(dir string) (Files, error) {
	files := Files{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem")}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return files, err
	}
	now := time.Now()
	caTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "raygo test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return files, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return files, err
	}
	template := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "raygo node"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:    []string{"localhost"},
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return files, err
	}
	der, err := x509.CreateCertificate(rand.Reader, template, caCert, &key.PublicKey, caKey)
	if err != nil {
		return files, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return files, err
	}
	for _, f := range []struct {
		path, kind string
		der        []byte
		mode       os.FileMode
	}{{files.CA, "CERTIFICATE", caDER, 0o644}, {files.Cert, "CERTIFICATE", der, 0o644}, {files.Key, "EC PRIVATE KEY", keyDER, 0o600}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.kind, Bytes: f.der}), f.mode); err != nil {
			return files, fmt.Errorf("tlscerts: %w", err)
		}
	}
	return files, nil
}
