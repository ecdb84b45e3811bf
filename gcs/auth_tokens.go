package gcs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sort"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/auth"
	"github.com/raygo-dev/raygo/internal/fielderr"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// tokenRegistry holds the scoped tokens the GCS issued (raygo auth issue|list|revoke):
// their SHA-256 and scope, one row per token in store.TableAuthTokens, and in memory
// for the check of every call. It is the GCS's auth.Verifier: the cluster token is
// admin; an issued token has its scope until it is revoked.
type tokenRegistry struct {
	pb.UnimplementedAuthServiceServer
	store        store.Store
	clusterToken string
	now          func() time.Time

	// authorizeLease checks that a tenant owns the job and group a lease names
	// (tenancy.authorizeLease); set before the server serves.
	authorizeLease func(ctx context.Context, scope auth.Scope, jobID, groupID string) error

	mu      sync.RWMutex
	records map[string]*pb.ScopedTokenRecord // by id
}

func newTokenRegistry(st store.Store, clusterToken string, now func() time.Time) *tokenRegistry {
	return &tokenRegistry{store: st, clusterToken: clusterToken, now: now, records: map[string]*pb.ScopedTokenRecord{}}
}

// load reads the issued tokens from the store (a GCS restart keeps them, and keeps the
// revoked ones out).
func (r *tokenRegistry) load(ctx context.Context) error {
	rows, err := r.store.GetAll(ctx, store.TableAuthTokens)
	if err != nil {
		return errorf(errUnavailable, "load the scoped tokens: %v", err)
	}
	records := make(map[string]*pb.ScopedTokenRecord, len(rows))
	for id, raw := range rows {
		record := &pb.ScopedTokenRecord{}
		if err := proto.Unmarshal(raw, record); err != nil {
			return errorf(errDataLoss, "scoped token %s: %v", id, err)
		}
		records[id] = record
	}
	r.mu.Lock()
	r.records = records
	r.mu.Unlock()
	return nil
}

// verifier is the GCS's auth.Verifier, for gRPC and the dashboard; nil without a cluster token (auth disabled).
func (r *tokenRegistry) verifier() auth.Verifier {
	if r.clusterToken == "" {
		return nil
	}
	return r.verify
}

// verify returns the scope of a presented token: admin for the cluster token, else the
// scope of the issued token whose hash it has. Every stored hash is compared, in
// constant time, so the time taken says nothing of which one matched.
func (r *tokenRegistry) verify(presented string) (auth.Scope, bool) {
	if auth.Equal(presented, r.clusterToken) {
		return auth.Admin, true
	}
	return r.scopeOfHash(auth.HashToken(presented))
}

// scopeOfHash is the scope of the issued, unrevoked token whose SHA-256 is hash.
func (r *tokenRegistry) scopeOfHash(hash string) (auth.Scope, bool) {
	var found *pb.ScopedTokenRecord
	r.mu.RLock()
	for _, record := range r.records {
		if auth.EqualHash(hash, record.Sha256) {
			found = record
		}
	}
	r.mu.RUnlock()
	if found == nil {
		return auth.Scope{}, false
	}
	scope, err := auth.ParseScope(found.Info.GetScope())
	return scope, err == nil
}

func (r *tokenRegistry) requireAuth() error {
	if r.clusterToken == "" {
		return errorf(errFailedPrecondition, "%s", "scoped tokens need auth: this GCS runs without a cluster token (RAYGO_AUTH_MODE=token turns it on)")
	}
	return nil
}

// IssueToken makes a token with the requested scope; only its hash is kept.
func (r *tokenRegistry) IssueToken(ctx context.Context, req *pb.IssueTokenRequest) (*pb.IssueTokenReply, error) {
	if err := r.requireAuth(); err != nil {
		return nil, err
	}
	scope, err := auth.ParseScope(req.Scope)
	if err != nil {
		return nil, errorf(fielderr.ErrInvalid, "scope: %v", err)
	}
	token, err := auth.Generate()
	if err != nil {
		return nil, errorf(errInternal, "%v", err)
	}
	rawID := make([]byte, 8)
	if _, err := rand.Read(rawID); err != nil {
		return nil, errorf(errInternal, "token id: %v", err)
	}
	record := &pb.ScopedTokenRecord{
		Info:   &pb.ScopedToken{Id: hex.EncodeToString(rawID), Scope: scope.String(), CreatedTimeMs: r.now().UnixMilli()},
		Sha256: auth.HashToken(token),
	}
	raw, err := proto.Marshal(record)
	if err != nil {
		return nil, errorf(errInternal, "encode the token: %v", err)
	}
	if err := r.store.Put(ctx, store.TableAuthTokens, record.Info.Id, raw); err != nil {
		return nil, errorf(errUnavailable, "save the token: %v", err)
	}
	r.mu.Lock()
	r.records[record.Info.Id] = record
	r.mu.Unlock()
	return &pb.IssueTokenReply{Info: record.Info, Token: token}, nil
}

// ListTokens lists the issued tokens by creation time, without their hashes.
func (r *tokenRegistry) ListTokens(context.Context, *pb.ListTokensRequest) (*pb.ListTokensReply, error) {
	if err := r.requireAuth(); err != nil {
		return nil, err
	}
	r.mu.RLock()
	reply := &pb.ListTokensReply{}
	for _, record := range r.records {
		reply.Tokens = append(reply.Tokens, proto.Clone(record.Info).(*pb.ScopedToken))
	}
	r.mu.RUnlock()
	sort.Slice(reply.Tokens, func(i, j int) bool {
		a, b := reply.Tokens[i], reply.Tokens[j]
		if a.CreatedTimeMs != b.CreatedTimeMs {
			return a.CreatedTimeMs < b.CreatedTimeMs
		}
		return a.Id < b.Id
	})
	return reply, nil
}

// RevokeToken removes an issued token: from the store first, so a GCS restart does not
// bring it back, then from memory, after which every call carrying it is refused.
func (r *tokenRegistry) RevokeToken(ctx context.Context, req *pb.RevokeTokenRequest) (*pb.RevokeTokenReply, error) {
	if err := r.requireAuth(); err != nil {
		return nil, err
	}
	if req.Id == "" {
		return nil, errorf(fielderr.ErrInvalid, "%s", "id: required (raygo auth list shows the ids)")
	}
	r.mu.RLock()
	_, known := r.records[req.Id]
	r.mu.RUnlock()
	if !known {
		return nil, errorf(errNotFound, "no issued token has id %q (raygo auth list shows the ids)", req.Id)
	}
	if _, err := r.store.Delete(ctx, store.TableAuthTokens, req.Id); err != nil {
		return nil, errorf(errUnavailable, "revoke the token: %v", err)
	}
	r.mu.Lock()
	delete(r.records, req.Id)
	r.mu.Unlock()
	return &pb.RevokeTokenReply{}, nil
}

// AuthorizeLease answers a raylet about a token it does not know (a tenant's, on a
// worker lease): its scope, and whether it owns the job and the group named. The
// raylet caches the answer briefly, so a revocation reaches raylets within that time.
func (r *tokenRegistry) AuthorizeLease(ctx context.Context, req *pb.AuthorizeLeaseRequest) (*pb.AuthorizeLeaseReply, error) {
	if err := r.requireAuth(); err != nil {
		return nil, err
	}
	scope, ok := r.scopeOfHash(req.TokenSha256)
	if !ok {
		return nil, errorf(errNotFound, "%s", "token_sha256: no issued token has it (unknown or revoked)")
	}
	if err := r.authorizeLease(ctx, scope, req.JobId, req.PlacementGroupId); err != nil {
		return nil, err
	}
	return &pb.AuthorizeLeaseReply{Scope: scope.String()}, nil
}
