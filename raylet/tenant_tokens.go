package raylet

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/internal/auth"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// tenantTokens answers, for a token the raylet does not know (a tenant's), whose it is
// and whether it owns the job and group a lease names, by asking the GCS
// (AuthService.AuthorizeLease, with the raylet's own credential) and keeping each
// definite answer for ttl: a revoked token is refused by raylets within ttl.
type tenantTokens struct {
	ask func(ctx context.Context, req *pb.AuthorizeLeaseRequest) (*pb.AuthorizeLeaseReply, error)
	ttl time.Duration

	mu      sync.Mutex
	answers map[tenantQuestion]tenantAnswer
}

// tenantQuestion is one question to the GCS: a token (by SHA-256), and the job and group
// of a lease ("" for none).
type tenantQuestion struct {
	tokenSHA256, jobID, groupID string
}

type tenantAnswer struct {
	scope auth.Scope
	err   error
	until time.Time
}

// maxTenantAnswers bounds the cache: past it, expired answers go, then all of them.
const maxTenantAnswers = 4096

// tenantAskTimeout bounds one question to the GCS.
const tenantAskTimeout = 2 * time.Second

func newTenantTokens(ask func(context.Context, *pb.AuthorizeLeaseRequest) (*pb.AuthorizeLeaseReply, error), ttl time.Duration) *tenantTokens {
	return &tenantTokens{ask: ask, ttl: ttl, answers: map[tenantQuestion]tenantAnswer{}}
}

// authorize returns the token's scope when the GCS says it owns the job and group, else
// an error for the caller (PermissionDenied, or Unauthenticated for a token the GCS does
// not know). An unreachable GCS is an error that is not kept.
func (t *tenantTokens) authorize(ctx context.Context, q tenantQuestion, now time.Time) (auth.Scope, error) {
	t.mu.Lock()
	answer, ok := t.answers[q]
	t.mu.Unlock()
	if ok && now.Before(answer.until) {
		return answer.scope, answer.err
	}
	ctx, cancel := context.WithTimeout(ctx, tenantAskTimeout)
	defer cancel()
	reply, err := t.ask(ctx, &pb.AuthorizeLeaseRequest{TokenSha256: q.tokenSHA256, JobId: q.jobID, PlacementGroupId: q.groupID})
	answer = tenantAnswer{until: now.Add(t.ttl)}
	switch status.Code(err) {
	case codes.OK:
		answer.scope, answer.err = auth.ParseScope(reply.Scope)
	case codes.NotFound:
		answer.err = status.Error(codes.Unauthenticated, "this raygo cluster refused the token the call carried (not the cluster's, nor a scoped token it issued and has not revoked): "+auth.Hint)
	case codes.PermissionDenied:
		answer.err = status.Error(codes.PermissionDenied, status.Convert(err).Message())
	default:
		return auth.Scope{}, status.Errorf(codes.Unavailable, "check the call's token with the GCS: %v", err)
	}
	t.mu.Lock()
	if len(t.answers) >= maxTenantAnswers {
		for old, kept := range t.answers {
			if !now.Before(kept.until) {
				delete(t.answers, old)
			}
		}
		if len(t.answers) >= maxTenantAnswers {
			clear(t.answers)
		}
	}
	t.answers[q] = answer
	t.mu.Unlock()
	return answer.scope, answer.err
}

// lookup is the raylet Verifier's last resort (auth.LearnedHashes.Lookup): a tenant's
// token, or an admin token issued by the GCS; never another node's token.
func (t *tenantTokens) lookup(presented string) (auth.Scope, bool) {
	scope, err := t.authorize(context.Background(), tenantQuestion{tokenSHA256: auth.HashToken(presented)}, time.Now())
	return scope, err == nil && (scope.IsTenant() || scope.Kind == auth.ScopeAdmin)
}

type lesseeKey struct{}

// lessee is the tenant a lease request is from: its token and the token's SHA-256.
type lessee struct{ token, tokenSHA256 string }

// withLessee marks a lease request as a tenant's: the worker it gets takes that
// tenant's token (and its server the token's SHA-256), never the raylet's.
func withLessee(ctx context.Context, token, tokenSHA256 string) context.Context {
	return context.WithValue(ctx, lesseeKey{}, lessee{token: token, tokenSHA256: tokenSHA256})
}

// lesseeFrom is the tenant withLessee set (zero for a lease with the cluster token).
func lesseeFrom(ctx context.Context) lessee {
	l, _ := ctx.Value(lesseeKey{}).(lessee)
	return l
}

// leasedTo reports whether the worker is leased with the token whose SHA-256 is lessee.
func (r *Raylet) leasedTo(workerID, lessee string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.workers[workerID]
	return w != nil && w.lease != nil && lessee != "" && auth.EqualHash(w.lease.lessee, lessee)
}

// authorizeTenant lets a tenant's token (scope) lease workers for its own jobs and
// groups only, and return or kill only the workers leased with it; nothing else on a
// raylet.
func (r *Raylet) authorizeTenant(ctx context.Context, scope auth.Scope, method string, req any) (context.Context, error) {
	token := rpcutil.TokenFromIncoming(ctx)
	lessee := auth.HashToken(token)
	switch req := req.(type) {
	case *pb.RequestWorkerLeaseRequest:
		if req.ActorId != "" {
			return ctx, status.Errorf(codes.PermissionDenied, "actor_id: an actor's worker is leased by the GCS; the %s token leases task workers only", scope)
		}
		if _, err := r.tenants.authorize(ctx, tenantQuestion{tokenSHA256: lessee, jobID: req.JobId, groupID: req.PlacementGroupId}, time.Now()); err != nil {
			return ctx, err
		}
		return withLessee(ctx, token, lessee), nil
	case *pb.ReturnWorkerRequest, *pb.KillWorkerRequest,
		*pb.RegisterWorkerRequest, *pb.NotifyWorkerBlockedRequest: // the last two: its task workers', which take its token
		workerID := req.(interface{ GetWorkerId() string }).GetWorkerId()
		if !r.leasedTo(workerID, lessee) {
			return ctx, status.Errorf(codes.PermissionDenied, "worker_id %s: not leased with this token (scope %s)", workerID, scope)
		}
		return ctx, nil
	}
	return ctx, status.Errorf(codes.PermissionDenied, "%s needs the cluster token; a tenant token (scope %s) leases, returns and kills its own task workers only", method, scope)
}
