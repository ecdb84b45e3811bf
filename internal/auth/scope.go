package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"
)

// ScopeKind is what a token may do.
type ScopeKind string

// The scopes a token can have. The cluster token is admin.
const (
	// ScopeAdmin may do everything: the cluster token, or a token issued with --scope admin.
	ScopeAdmin ScopeKind = "admin"
	// ScopeNode is a machine's credential: register nodes, the autoscaler's service, and
	// reading the cluster; never a tenant's work.
	ScopeNode ScopeKind = "node"
	// ScopeQueue is a tenant: work charged to one admission queue (a namespace maps to a
	// queue through the queue configuration).
	ScopeQueue ScopeKind = "queue"
	// ScopeNamespace is a tenant: work in one namespace.
	ScopeNamespace ScopeKind = "namespace"
)

// Scope is a token's scope: its kind and, for a tenant, the queue or namespace.
type Scope struct {
	Kind ScopeKind
	Name string
}

// Admin is the cluster token's scope.
var Admin = Scope{Kind: ScopeAdmin}

// ParseScope reads admin, node, queue:<q> or namespace:<ns>.
func ParseScope(text string) (Scope, error) {
	kind, name, hasName := strings.Cut(strings.TrimSpace(text), ":")
	switch ScopeKind(kind) {
	case ScopeAdmin, ScopeNode:
		if hasName {
			return Scope{}, fmt.Errorf("scope %q: %s takes no name", text, kind)
		}
		return Scope{Kind: ScopeKind(kind)}, nil
	case ScopeQueue, ScopeNamespace:
		if name == "" {
			return Scope{}, fmt.Errorf("scope %q: %s:<name> needs the name", text, kind)
		}
		if strings.ContainsAny(name, " \t\n\x00") || len(name) > 256 {
			return Scope{}, fmt.Errorf("scope %q: the name must be at most 256 bytes without spaces", text)
		}
		return Scope{Kind: ScopeKind(kind), Name: name}, nil
	default:
		return Scope{}, fmt.Errorf("scope %q: must be admin, node, queue:<queue> or namespace:<namespace>", text)
	}
}

// String is the scope as ParseScope reads it.
func (s Scope) String() string {
	if s.Name == "" {
		return string(s.Kind)
	}
	return string(s.Kind) + ":" + s.Name
}

// IsTenant reports whether the scope is one tenant's (queue or namespace).
func (s Scope) IsTenant() bool { return s.Kind == ScopeQueue || s.Kind == ScopeNamespace }

// HashToken is what a server keeps of an issued token: hex SHA-256. Tokens are 256
// random bits, so a plain hash cannot be reversed by guessing.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// EqualHash compares two hashes from HashToken in constant time.
func EqualHash(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

type scopeKey struct{}

// WithScope returns ctx carrying the scope of the call's token (set by the server's
// token check).
func WithScope(ctx context.Context, scope Scope) context.Context {
	return context.WithValue(ctx, scopeKey{}, scope)
}

// ScopeFrom returns the scope of the call's token. A call on a server without auth
// carries none and is admin.
func ScopeFrom(ctx context.Context) Scope {
	if scope, ok := ctx.Value(scopeKey{}).(Scope); ok {
		return scope
	}
	return Admin
}

// Verifier says whose a presented token is: its scope, or false to refuse it. A nil
// Verifier lets everything in (auth disabled). Servers of gRPC (internal/rpcutil) and
// HTTP (internal/metricsserver) take one.
type Verifier func(presented string) (Scope, bool)

// ClusterToken is the Verifier that accepts only the cluster token, as admin (nil for
// an empty token: auth disabled).
func ClusterToken(token string) Verifier {
	if token == "" {
		return nil
	}
	return func(presented string) (Scope, bool) {
		return Admin, Equal(presented, token)
	}
}

// EnvTokenSHA256 gives a worker the cluster token's SHA-256 (from its raylet) when its
// own RAYGO_AUTH_TOKEN is a node token: its server then accepts the cluster token.
const EnvTokenSHA256 = "RAYGO_AUTH_TOKEN_SHA256"

// ClusterTokenHash is the Verifier of a process that may not hold the cluster token (a
// raylet started with a node token, and its workers): it accepts, as admin, the token
// whose HashToken is *hash (read at each call, so a raylet can learn it when it
// registers), and its own token, which its raylet and workers use between them, as node
// (as admin when it is the cluster token).
func ClusterTokenHash(hash *atomic.Pointer[string], own string) Verifier {
	return func(presented string) (Scope, bool) {
		if expected := hash.Load(); expected != nil && *expected != "" && EqualHash(HashToken(presented), *expected) {
			return Admin, true
		}
		return Scope{Kind: ScopeNode}, own != "" && Equal(presented, own)
	}
}
