package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/internal/auth"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// autoscalerTokenFile is where, in the head's session directory, the head keeps the
// node-scoped token it gives its autoscaler.
const autoscalerTokenFile = "autoscaler_node_token"

// autoscalerEnv is the environment of the head's autoscaler: nil (this process's) with
// auth off. With auth on, the autoscaler gets a node-scoped token instead of the cluster
// token: the cluster token is taken out of its environment and RAYGO_AUTH_TOKEN_PATH
// names an owner-only file in the session directory holding the node token. A node token
// is all the autoscaler needs (it reads the cluster's state, reports, and drains nodes:
// the AutoscalerStateService), and the nodes it launches join with it (fake_multinode's
// inherit its environment; the AWS user data carries it), so neither the autoscaler nor
// a launched node holds the cluster token. The token is issued once and reused while
// the GCS still takes it (a restarted autoscaler; a GCS that lost it gets a new one
// issued).
func (s *supervisor) autoscalerEnv(ctx context.Context) ([]string, error) {
	if os.Getenv(auth.EnvMode) != string(auth.ModeToken) {
		return nil, nil
	}
	path := filepath.Join(s.sessionDir, autoscalerTokenFile)
	conn, err := rpcutil.Dial(s.opts.gcsAddress, rpcutil.DialOptions{})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if raw, err := os.ReadFile(path); err != nil || !nodeTokenWorks(ctx, s.opts.gcsAddress, strings.TrimSpace(string(raw))) {
		reply, err := pb.NewAuthServiceClient(conn).IssueToken(ctx, &pb.IssueTokenRequest{Scope: string(auth.ScopeNode)})
		if err != nil {
			return nil, fmt.Errorf("issue the autoscaler's node token: %w", err)
		}
		if err := auth.Save(path, reply.Token); err != nil {
			return nil, err
		}
		s.log.Info().Str("token_id", reply.Info.Id).Msg("issued the autoscaler's node-scoped token")
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, auth.EnvToken+"=") && !strings.HasPrefix(kv, auth.EnvTokenPath+"=") {
			env = append(env, kv)
		}
	}
	return append(env, auth.EnvTokenPath+"="+path), nil
}

// nodeTokenWorks reports whether the GCS at address takes token for the autoscaler's
// calls.
func nodeTokenWorks(ctx context.Context, address, token string) bool {
	if token == "" {
		return false
	}
	conn, err := rpcutil.Dial(address, rpcutil.DialOptions{Token: token})
	if err != nil {
		return false
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = pb.NewAutoscalerStateServiceClient(conn).GetClusterResourceState(ctx, &pb.GetClusterResourceStateRequest{})
	return err == nil
}

// launchedNodeToken is the token the AWS user data gives the nodes this autoscaler
// launches: its own, when auth is not off and it is not an admin token (the GCS refuses it
// ListTokens, as it refuses a node token). An admin token (the cluster token) never goes
// into user data: then the nodes get none, with a warning.
func launchedNodeToken(ctx context.Context, address string, log zerolog.Logger) (string, error) {
	if os.Getenv(auth.EnvMode) == string(auth.ModeDisabled) {
		return "", nil
	}
	token, err := auth.Load()
	if err != nil || token == "" {
		return "", err
	}
	conn, err := rpcutil.Dial(address, rpcutil.DialOptions{Token: token})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = pb.NewAuthServiceClient(conn).ListTokens(ctx, &pb.ListTokensRequest{})
	switch status.Code(err) {
	case codes.PermissionDenied:
		return token, nil
	case codes.OK:
		log.Warn().Msg("the autoscaler holds an admin token: the nodes it launches get none in their user data; " +
			"run it with a node-scoped one (raygo auth issue --scope node) in " + auth.EnvTokenPath + ", as raygo start --head does")
		return "", nil
	default:
		return "", fmt.Errorf("check the autoscaler's token: %w", err)
	}
}
