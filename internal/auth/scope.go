package auth

import (
	"context"
	"crypto/hmac"
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
	// ScopeGCS is the GCS's own credential, on its calls to raylets: a random secret the
	// GCS keeps in its store and no token holder has. Raylets take the 2PC and every
	// epoch-bearing call with it alone. It is never issued (ParseScope refuses it).
	ScopeGCS ScopeKind = "gcs"
	// ScopeLessee is, on a worker, the token of the driver its raylet leased it to (by
	// its SHA-256, LearnedHashes.Lessee): a tenant's token reaches the workers of its
	// own leases only. It is never issued.
	ScopeLessee ScopeKind = "lessee"
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

// WorkerCredential is the credential the GCS's calls to one worker carry: derived from
// the SHA-256 of the GCS's own credential (which the GCS and the raylets hold, and
// workers never) and the worker's id, so a worker's code that reads it from a call it
// serves holds a credential good for that worker alone, never the GCS's own nor the
// cluster token.
func WorkerCredential(gcsCredentialSHA256, workerID string) string {
	mac := hmac.New(sha256.New, []byte(gcsCredentialSHA256))
	mac.Write([]byte("raygo worker " + workerID))
	return hex.EncodeToString(mac.Sum(nil))
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

// EnvLesseeTokenSHA256 gives a worker leased with a tenant's token that token's SHA-256
// (from its raylet): its server then accepts the tenant's calls too (ScopeLessee).
const EnvLesseeTokenSHA256 = "RAYGO_LESSEE_TOKEN_SHA256"

// EnvGCSCredentialSHA256 gives a worker the SHA-256 of the GCS's credential for it
// (WorkerCredential, from its raylet): its server then accepts the GCS's calls
// (ScopeGCS), which never carry the cluster token nor the GCS's own credential.
const EnvGCSCredentialSHA256 = "RAYGO_GCS_CREDENTIAL_SHA256"

// LearnedHashes are the SHA-256s (HashToken) of the cluster's credentials that a process
// which may not hold them learns from the GCS (RegisterNodeReply) or from its raylet:
// read at each call, so they can be learned after the server started. Empty or unset,
// the credential is not accepted.
type LearnedHashes struct {
	// ClusterToken is the cluster token's: its holders (drivers, admins) are admin.
	ClusterToken atomic.Pointer[string]
	// GCSCredential is the GCS's own credential's: only the GCS holds it (ScopeGCS).
	GCSCredential atomic.Pointer[string]
	// Lessee is, on a worker, its lessee's token's (ScopeLessee).
	Lessee atomic.Pointer[string]
	// Lookup, when set, is asked about any other token (a raylet asks the GCS about
	// tenants' tokens); it must answer quickly (a raylet caches the GCS's answers).
	Lookup func(presented string) (Scope, bool)
}

// matches reports whether presented hashes to the learned hash in p.
func matches(p *atomic.Pointer[string], presentedHash string) bool {
	expected := p.Load()
	return expected != nil && *expected != "" && EqualHash(presentedHash, *expected)
}

// ClusterTokenHash is the Verifier of a process that may not hold the cluster token (a
// raylet, and its workers): it accepts the GCS's credential as ScopeGCS, the cluster
// token as admin, a worker's lessee's token as ScopeLessee, all by the hashes in learned,
// its own token, which its raylet and workers use between them, as node (as admin when it
// is the cluster token), and what learned.Lookup accepts.
func ClusterTokenHash(learned *LearnedHashes, own string) Verifier {
	return func(presented string) (Scope, bool) {
		presentedHash := HashToken(presented)
		if matches(&learned.GCSCredential, presentedHash) {
			return Scope{Kind: ScopeGCS}, true
		}
		if matches(&learned.ClusterToken, presentedHash) {
			return Admin, true
		}
		if matches(&learned.Lessee, presentedHash) {
			return Scope{Kind: ScopeLessee}, true
		}
		if own != "" && Equal(presented, own) {
			return Scope{Kind: ScopeNode}, true
		}
		if learned.Lookup != nil && presented != "" {
			return learned.Lookup(presented)
		}
		return Scope{}, false
	}
}
