package raylet

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/internal/auth"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// The GCS's answers about a tenant token are kept for the TTL (a revocation reaches the
// raylet when the kept answer expires); an unreachable GCS's error is not kept.
func TestTenantTokenAnswersAreKeptForTheTTL(t *testing.T) {
	token := auth.HashToken("tenant")
	var asked int
	verdict := error(nil)
	tokens := newTenantTokens(func(_ context.Context, req *pb.AuthorizeLeaseRequest) (*pb.AuthorizeLeaseReply, error) {
		asked++
		if req.TokenSha256 != token {
			return nil, status.Error(codes.NotFound, "unknown")
		}
		if verdict != nil {
			return nil, verdict
		}
		return &pb.AuthorizeLeaseReply{Scope: "queue:a"}, nil
	}, 5*time.Second)
	start := time.Unix(1000, 0)
	question := tenantQuestion{tokenSHA256: token, jobID: "01000000"}

	steps := []struct {
		name      string
		at        time.Duration
		verdict   error
		wantCode  codes.Code
		wantAsked int
	}{
		{"first question asks the GCS", 0, nil, codes.OK, 1},
		{"within the TTL the kept answer", 4 * time.Second, status.Error(codes.NotFound, "revoked"), codes.OK, 1},
		{"after the TTL the GCS again: revoked", 5 * time.Second, status.Error(codes.NotFound, "revoked"), codes.Unauthenticated, 2},
		{"a refusal is kept too", 9 * time.Second, nil, codes.Unauthenticated, 2},
		{"an unreachable GCS is not kept", 11 * time.Second, status.Error(codes.Unavailable, "down"), codes.Unavailable, 3},
		{"so the next call asks again", 11 * time.Second, status.Error(codes.PermissionDenied, "job_id 01000000: not yours"), codes.PermissionDenied, 4},
	}
	for _, step := range steps {
		verdict = step.verdict
		scope, err := tokens.authorize(context.Background(), question, start.Add(step.at))
		if status.Code(err) != step.wantCode || asked != step.wantAsked {
			t.Errorf("%s: %v %v after %d questions; want %s after %d", step.name, scope, err, asked, step.wantCode, step.wantAsked)
		}
		if step.wantCode == codes.OK && scope != (auth.Scope{Kind: auth.ScopeQueue, Name: "a"}) {
			t.Errorf("%s: scope %v, want queue:a", step.name, scope)
		}
	}
	if _, ok := tokens.lookup("another"); ok {
		t.Error("an unknown token was accepted")
	}
}
