// Package rpcutil holds what every raygo gRPC endpoint shares: the protocol version
// exchanged on every call, the cluster token (internal/auth) carried on every call and
// required by servers that have one, the GCS epoch carried on GCS → raylet requests, and
// dialing.
package rpcutil

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/internal/auth"
)

// ProtocolVersion is the raygo wire protocol version. Bump it on any incompatible change
// to protos/: a client and a server that disagree refuse each other with both versions
// named.
const ProtocolVersion uint32 = 1

const (
	// metadataProtocolVersion travels on every request and every response header.
	metadataProtocolVersion = "raygo-protocol-version"
	// metadataGCSEpoch travels on every GCS → raylet request (fencing of a stale GCS).
	metadataGCSEpoch = "raygo-gcs-epoch"
	// metadataAuthorization carries the cluster token as "Bearer <token>", as Ray's.
	metadataAuthorization = "authorization"
	bearerPrefix          = "Bearer "
	// healthServicePrefix is exempt from the version check: load balancers and probes
	// speak the standard health protocol without raygo's metadata.
	healthServicePrefix = "/grpc.health.v1."
)

// ServerOptions returns the options every raygo gRPC server uses: with a token, every
// call without it is refused (Unauthenticated, saying what to set); the version check
// for the given server version (normally ProtocolVersion) on unary and streaming calls;
// and any extra unary interceptors, which run after them. An empty token lets every
// call in (auth disabled). With RAYGO_USE_TLS=1, mutual TLS (ServerTLS); its settings
// are the only error.
func ServerOptions(serverVersion uint32, token string, extra ...grpc.UnaryServerInterceptor) ([]grpc.ServerOption, error) {
	return VerifiedServerOptions(serverVersion, auth.ClusterToken(token), extra...)
}

// VerifiedServerOptions is ServerOptions with a Verifier deciding which tokens are let
// in (the GCS's also accepts the scoped tokens it issued); the scope of the call's token
// is in the handler's context (auth.ScopeFrom).
func VerifiedServerOptions(serverVersion uint32, verify auth.Verifier, extra ...grpc.UnaryServerInterceptor) ([]grpc.ServerOption, error) {
	tlsOptions, err := ServerTLS()
	if err != nil {
		return nil, err
	}
	chain := append([]grpc.UnaryServerInterceptor{versionServerInterceptor(serverVersion, verify)}, extra...)
	return append(tlsOptions,
		grpc.ChainUnaryInterceptor(chain...),
		grpc.ChainStreamInterceptor(versionStreamServerInterceptor(serverVersion, verify)),
		grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes),
		grpc.StaticStreamWindowSize(StreamWindowBytes), grpc.StaticConnWindowSize(ConnWindowBytes),
		// Calls run on long-lived goroutines whose stacks have grown already (a new
		// goroutine per call grows and copies its stack on every call); when all are busy
		// (long polls), a call gets a goroutine of its own as without the option.
		grpc.NumStreamWorkers(uint32(4*runtime.GOMAXPROCS(0))),
		// Clients ping every KeepaliveTime; allow it.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveTime / 2, PermitWithoutStream: true}),
	), nil
}

func versionServerInterceptor(serverVersion uint32, verify auth.Verifier) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if strings.HasPrefix(info.FullMethod, healthServicePrefix) {
			return handler(ctx, req)
		}
		ctx, err := checkToken(ctx, verify)
		if err != nil {
			return nil, err
		}
		_ = grpc.SetHeader(ctx, versionHeader(serverVersion))
		if err := checkClientVersion(ctx, serverVersion); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// scopedStream is a server stream whose context carries the call's scope.
type scopedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s scopedStream) Context() context.Context { return s.ctx }

func versionStreamServerInterceptor(serverVersion uint32, verify auth.Verifier) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if strings.HasPrefix(info.FullMethod, healthServicePrefix) {
			return handler(srv, ss)
		}
		ctx, err := checkToken(ss.Context(), verify)
		if err != nil {
			return err
		}
		_ = ss.SetHeader(versionHeader(serverVersion))
		if err := checkClientVersion(ss.Context(), serverVersion); err != nil {
			return err
		}
		return handler(srv, scopedStream{ServerStream: ss, ctx: ctx})
	}
}

// checkToken refuses a call whose token verify does not accept (nil verify: no check)
// and returns ctx carrying the token's scope.
func checkToken(ctx context.Context, verify auth.Verifier) (context.Context, error) {
	if verify == nil {
		return ctx, nil
	}
	token := TokenFromIncoming(ctx)
	if token == "" {
		return ctx, status.Error(codes.Unauthenticated, "this raygo cluster requires its token and the call carried none: "+auth.Hint)
	}
	scope, ok := verify(token)
	if !ok {
		return ctx, status.Error(codes.Unauthenticated, "this raygo cluster refused the token the call carried (not the cluster's, nor a scoped token it issued and has not revoked): "+auth.Hint)
	}
	return auth.WithScope(ctx, scope), nil
}

func versionHeader(version uint32) metadata.MD {
	return metadata.Pairs(metadataProtocolVersion, strconv.FormatUint(uint64(version), 10))
}

// checkClientVersion refuses a request whose protocol version is missing or differs.
func checkClientVersion(ctx context.Context, serverVersion uint32) error {
	md, _ := metadata.FromIncomingContext(ctx)
	values := md.Get(metadataProtocolVersion)
	if len(values) == 0 {
		return status.Errorf(codes.FailedPrecondition,
			"protocol version missing: this server speaks raygo protocol %d and needs the %q header", serverVersion, metadataProtocolVersion)
	}
	clientVersion, err := strconv.ParseUint(values[0], 10, 32)
	if err != nil || uint32(clientVersion) != serverVersion {
		return status.Errorf(codes.FailedPrecondition,
			"protocol version mismatch: client speaks raygo protocol %s, server speaks %d", values[0], serverVersion)
	}
	return nil
}

// Limits every raygo endpoint shares.
const (
	// MaxMessageBytes bounds one gRPC message: task arguments and results travel
	// inline, as Ray's small objects do, so the default 4 MiB is too tight.
	MaxMessageBytes = 256 << 20
	// StreamWindowBytes and ConnWindowBytes are fixed HTTP/2 flow-control windows (per
	// call, per connection) on every server and client. gRPC's default sizes its windows
	// by probing: after data arrives it sends a PING and a window update, and the peer
	// answers the PING, so each small call cost two more writes and two more wake-ups on
	// each side. 4 MiB in flight per call still moves 8 GB/s at a 0.5 ms round trip.
	StreamWindowBytes = 4 << 20
	ConnWindowBytes   = 16 << 20
	// KeepaliveTime and KeepaliveTimeout: a client pings a connection idle for
	// KeepaliveTime and drops it when the ping is not answered within KeepaliveTimeout,
	// so a call to a peer that vanished (a node powered off) fails in about 15 s
	// instead of waiting for TCP to give up.
	KeepaliveTime    = 10 * time.Second
	KeepaliveTimeout = 5 * time.Second
	// MaxReconnectDelay caps the wait between attempts to reconnect a dropped connection
	// (gRPC's default grows to 120 s): after a partition or a restart longer than a few
	// seconds, calls would otherwise fail at once for up to two minutes more.
	MaxReconnectDelay = 5 * time.Second
)

// DialOptions configure Dial.
type DialOptions struct {
	// ProtocolVersion sent to the server; zero means ProtocolVersion. Tests set it to
	// check mismatches.
	ProtocolVersion uint32
	// Epoch, when set, returns the GCS epoch to attach to every request (GCS → raylet).
	Epoch func() int64
	// Token is the cluster token to attach to every request; empty means the one this
	// process finds (auth.Load: RAYGO_AUTH_TOKEN, RAYGO_AUTH_TOKEN_PATH,
	// ~/.raygo/auth_token), if any.
	Token string
}

// Dial opens a lazy client connection to a raygo server at addr (host:port). Every call,
// unary or streaming, carries the protocol version, the cluster token when there is one,
// and the epoch with opts.Epoch; a reply from a server of another version fails with an
// error naming both versions and the address, and a refused token with one naming the
// variable to set. A token file this process cannot use is an error here.
func Dial(addr string, opts DialOptions) (*grpc.ClientConn, error) {
	version := opts.ProtocolVersion
	if version == 0 {
		version = ProtocolVersion
	}
	token := opts.Token
	if token == "" {
		var err error
		if token, err = auth.Load(); err != nil {
			return nil, fmt.Errorf("dial %s: %w", addr, err)
		}
	}
	transport, err := clientTransport()
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	if transport == nil {
		transport = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(transport),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout}),
		grpc.WithStaticStreamWindowSize(StreamWindowBytes), grpc.WithStaticConnWindowSize(ConnWindowBytes),
		grpc.WithConnectParams(reconnectParams()),
		grpc.WithChainUnaryInterceptor(versionClientInterceptor(addr, version, token, opts.Epoch)),
		grpc.WithChainStreamInterceptor(versionStreamClientInterceptor(addr, version, token, opts.Epoch)),
	)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return conn, nil
}

// reconnectParams are gRPC's defaults with the wait capped at MaxReconnectDelay.
func reconnectParams() grpc.ConnectParams {
	b := backoff.DefaultConfig
	b.MaxDelay = MaxReconnectDelay
	return grpc.ConnectParams{Backoff: b, MinConnectTimeout: 20 * time.Second}
}

func versionClientInterceptor(addr string, version uint32, token string, epoch func() int64) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		ctx = withOutgoingVersion(ctx, version, token, epoch)
		var header metadata.MD
		err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Header(&header))...)
		if err != nil {
			return nameVersionError(err, method, addr)
		}
		return checkServerVersion(header, version, addr)
	}
}

// versionStreamClientInterceptor does for streams what versionClientInterceptor does for
// unary calls; the server's version is checked when the first reply (or the end of the
// stream) arrives, which is when its header is known.
func versionStreamClientInterceptor(addr string, version uint32, token string, epoch func() int64) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		stream, err := streamer(withOutgoingVersion(ctx, version, token, epoch), desc, cc, method, opts...)
		if err != nil {
			return nil, nameVersionError(err, method, addr)
		}
		return &versionCheckedStream{ClientStream: stream, method: method, addr: addr, version: version}, nil
	}
}

type versionCheckedStream struct {
	grpc.ClientStream
	method, addr string
	version      uint32
	checked      bool
}

func (s *versionCheckedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil && err != io.EOF {
		return nameVersionError(err, s.method, s.addr)
	}
	if !s.checked {
		s.checked = true
		if header, headerErr := s.Header(); headerErr == nil {
			if versionErr := checkServerVersion(header, s.version, s.addr); versionErr != nil {
				return versionErr
			}
		}
	}
	return err
}

func withOutgoingVersion(ctx context.Context, version uint32, token string, epoch func() int64) context.Context {
	pairs := []string{metadataProtocolVersion, strconv.FormatUint(uint64(version), 10)}
	if token != "" {
		pairs = append(pairs, metadataAuthorization, bearerPrefix+token)
	}
	if epoch != nil {
		pairs = append(pairs, metadataGCSEpoch, strconv.FormatInt(epoch(), 10))
	}
	return metadata.AppendToOutgoingContext(ctx, pairs...)
}

// nameVersionError adds the method and address to a server's protocol-version or token
// refusal.
func nameVersionError(err error, method, addr string) error {
	s, ok := status.FromError(err)
	switch {
	case ok && s.Code() == codes.FailedPrecondition && strings.HasPrefix(s.Message(), "protocol version"),
		ok && s.Code() == codes.Unauthenticated:
		return status.Errorf(s.Code(), "%s at %s: %s", method, addr, s.Message())
	}
	return err
}

func checkServerVersion(header metadata.MD, version uint32, addr string) error {
	if values := header.Get(metadataProtocolVersion); len(values) > 0 && values[0] != strconv.FormatUint(uint64(version), 10) {
		return status.Errorf(codes.FailedPrecondition,
			"protocol version mismatch: client speaks raygo protocol %d, server at %s speaks %s", version, addr, values[0])
	}
	return nil
}

// TokenFromIncoming returns the token a request carries ("" for none).
func TokenFromIncoming(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	values := md.Get(metadataAuthorization)
	if len(values) == 0 || !strings.HasPrefix(values[0], bearerPrefix) {
		return ""
	}
	return strings.TrimPrefix(values[0], bearerPrefix)
}

// EpochFromIncoming returns the GCS epoch a request carries, if any.
func EpochFromIncoming(ctx context.Context) (int64, bool) {
	md, _ := metadata.FromIncomingContext(ctx)
	values := md.Get(metadataGCSEpoch)
	if len(values) == 0 {
		return 0, false
	}
	epoch, err := strconv.ParseInt(values[0], 10, 64)
	if err != nil {
		return 0, false
	}
	return epoch, true
}

// Backoff yields exponentially growing waits between Min and Max.
type Backoff struct {
	Min, Max time.Duration
	next     time.Duration
}

// Next returns the wait before the next attempt.
func (b *Backoff) Next() time.Duration {
	if b.next == 0 {
		b.next = b.Min
	}
	current := b.next
	b.next *= 2
	if b.next > b.Max {
		b.next = b.Max
	}
	return current
}

// Reset starts again from Min after a success.
func (b *Backoff) Reset() { b.next = 0 }

// IsUnavailable reports whether err means the peer could not be reached.
func IsUnavailable(err error) bool {
	s, ok := status.FromError(err)
	return ok && (s.Code() == codes.Unavailable || s.Code() == codes.DeadlineExceeded)
}
