// Package auth holds the cluster token: where a process finds it, how the head makes
// one, and how servers compare it. Names follow Ray's token authentication (RAY_AUTH_MODE,
// RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH) with a RAYGO_ prefix.
//
// Every gRPC call carries the token as `authorization: Bearer <token>` metadata
// (internal/rpcutil); a server that has one refuses calls without it.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// The environment variables, as Ray's with RAYGO_.
const (
	// EnvMode is token or disabled; unset, auth is on for a cluster on a non-loopback
	// address and off on loopback.
	EnvMode = "RAYGO_AUTH_MODE"
	// EnvToken holds the token itself.
	EnvToken = "RAYGO_AUTH_TOKEN"
	// EnvTokenPath names a file holding the token.
	EnvTokenPath = "RAYGO_AUTH_TOKEN_PATH"
)

// Mode says whether servers require the token.
type Mode string

// The modes.
const (
	ModeToken    Mode = "token"
	ModeDisabled Mode = "disabled"
)

// Hint is what a client refused for its token is told to do.
const Hint = "set " + EnvToken + " (or " + EnvTokenPath + " to a file holding it, or put it in ~/.raygo/auth_token); `raygo get-auth-token` on the head prints it"

// ModeFor returns the mode for a cluster served on host: EnvMode when set, else token
// unless host is a loopback address. explicit reports that EnvMode chose.
func ModeFor(host string) (mode Mode, explicit bool, err error) {
	switch value := strings.TrimSpace(os.Getenv(EnvMode)); value {
	case "":
		if IsLoopback(host) {
			return ModeDisabled, false, nil
		}
		return ModeToken, false, nil
	case string(ModeToken), string(ModeDisabled):
		return Mode(value), true, nil
	default:
		return "", false, fmt.Errorf("%s=%q: must be token or disabled", EnvMode, value)
	}
}

// IsLoopback reports whether host is localhost or a loopback IP address.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// DefaultTokenPath is ~/.raygo/auth_token ("" when there is no home directory).
func DefaultTokenPath() string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return ""
	}
	return filepath.Join(home, ".raygo", "auth_token")
}

// TokenPath is where this process reads and the head saves the token: EnvTokenPath,
// else DefaultTokenPath.
func TokenPath() string {
	if path := os.Getenv(EnvTokenPath); path != "" {
		return path
	}
	return DefaultTokenPath()
}

// underRaylet reports whether this process is a worker a raylet with auth started: its
// raylet sets EnvTokenSHA256, maybe empty.
func underRaylet() bool {
	_, set := os.LookupEnv(EnvTokenSHA256)
	return set
}

// Load returns the token: EnvToken, else the file at TokenPath. It returns "" without
// an error when there is none; a file that exists but cannot be read, is empty, or is
// readable by others than its owner is an error naming it. A raylet's worker under auth
// (EnvTokenSHA256 set) has only the token its raylet gave it, none for a tenant's actor:
// it never falls back to a token file, which may hold the cluster token.
func Load() (string, error) {
	if token := strings.TrimSpace(os.Getenv(EnvToken)); token != "" || underRaylet() {
		return token, nil
	}
	path := TokenPath()
	if path == "" {
		return "", nil
	}
	info, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		if os.Getenv(EnvTokenPath) != "" {
			return "", fmt.Errorf("%s=%s: no such file", EnvTokenPath, path)
		}
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("token file %s: mode %o lets others read it; chmod 600 %s", path, info.Mode().Perm(), path)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" {
		return "", fmt.Errorf("token file %s: empty", path)
	}
	return token, nil
}

// Generate returns a new random token (32 bytes, hex).
func Generate() (string, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("generate a token: %w", err)
	}
	return hex.EncodeToString(raw), nil
}

// Save writes token to path, readable by its owner only (its directory too, when it
// creates it), replacing any file there in one rename.
func Save(path, token string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("save the token: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".auth_token-*")
	if err != nil {
		return fmt.Errorf("save the token: %w", err)
	}
	defer os.Remove(tmp.Name())
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.WriteString(token + "\n")
	}
	if err == nil {
		err = tmp.Sync()
	}
	if closeErr := tmp.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("save the token to %s: %w", path, err)
	}
	return nil
}

// Equal compares a presented token with the expected one in constant time.
func Equal(presented, expected string) bool {
	return subtle.ConstantTimeCompare([]byte(presented), []byte(expected)) == 1
}

// GossipKey derives memberlist's AES-256 key from the token: members without the
// token can neither read the gossip nor join it.
func GossipKey(token string) []byte {
	sum := sha256.Sum256([]byte("raygo memberlist key\x00" + token))
	return sum[:]
}
