package raylet

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/internal/auth"
	"github.com/raygo-dev/raygo/internal/membership"
	"github.com/raygo-dev/raygo/internal/metricsserver"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/raylet/gpu"
)

// Raylet is a running node agent.
type Raylet struct {
	cfg  Config
	log  zerolog.Logger
	node *pb.NodeInfo // immutable after Start, except under mu

	listener net.Listener
	grpc     *grpc.Server
	gossip   *membership.Agent
	gcsConn  *grpc.ClientConn
	nodes    pb.NodeInfoServiceClient
	// gcsConnLost: the connection to the GCS left READY since the last heartbeat.
	gcsConnLost atomic.Bool

	mu        sync.Mutex
	epoch     int64 // newest GCS epoch seen
	draining  bool
	bundles   *bundleTable
	gcsGossip string // the GCS memberlist address we last joined
	// metrics serves /metrics (Config.MetricsAddress); nil when not served.
	metrics *metricsserver.Server
	// activity is the GPUs' last activity sample (gpu_activity.go).
	activity gpuActivity
	// learned holds the SHA-256s of the cluster token, whose holders (drivers, admins)
	// the raylet and its workers serve, and of the GCS's own credential, which alone
	// reaches the 2PC and the epoch-bearing calls (scopeInterceptor), both from the GCS
	// (RegisterNodeReply): a raylet started with a node token serves the cluster token
	// without holding it, and no raylet holds the GCS's credential.
	learned auth.LearnedHashes
	// tenants vouches for tenants' tokens through the GCS (nil with auth off).
	tenants *tenantTokens
	// nodeSecret is what the GCS issued at the first registration; registrations,
	// heartbeats and the unregistration carry it.
	nodeSecret string
	// resourcesVersion grows with every change of the bundle reservations and worker
	// leases.
	resourcesVersion int64
	// workers is the worker pool by worker id: starting, leased and idle workers.
	workers map[string]*worker
	// roomFreed is closed (and replaced) whenever resources may have been freed, waking
	// the lease requests that queue for room.
	roomFreed chan struct{}

	executables *executableCache
	actors      pb.ActorInfoServiceClient
	// stopDownloads ends the executable downloads in flight at Stop.
	stopDownloads context.CancelFunc

	stop     chan struct{}
	done     chan error
	stopOnce sync.Once
}

// Start binds the raylet's ports, registers with the GCS (which must answer) and keeps
// the registration alive in the background until Stop.
func Start(ctx context.Context, cfg Config) (_ *Raylet, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.NodeID == "" {
		cfg.NodeID = NewNodeID()
	}
	if cfg.NodeName == "" {
		cfg.NodeName = cfg.NodeIP
	}
	r := &Raylet{
		cfg: cfg, log: cfg.Logger.With().Str("node_id", cfg.NodeID).Logger(), stop: make(chan struct{}), done: make(chan error, 1),
		workers: map[string]*worker{}, roomFreed: make(chan struct{}),
	}
	defer func() {
		if err != nil {
			r.closeAll()
		}
	}()

	r.listener, err = net.Listen("tcp", net.JoinHostPort(cfg.NodeIP, strconv.Itoa(cfg.Port)))
	if err != nil {
		return nil, fmt.Errorf("raylet listen on %s:%d: %w", cfg.NodeIP, cfg.Port, err)
	}
	mcfg := cfg.Membership
	mcfg.Name = cfg.NodeID
	mcfg.BindIP = cfg.NodeIP
	mcfg.Port = cfg.GossipPort
	mcfg.Meta = membership.Meta{Kind: "raylet", NodeID: cfg.NodeID, RayletAddress: r.listener.Addr().String()}
	if cfg.AuthToken != "" {
		mcfg.SecretKey = auth.GossipKey(cfg.AuthToken)
	}
	if r.gossip, err = membership.Start(mcfg, nil); err != nil {
		return nil, err
	}
	r.node = r.describeNode()
	totals, err := resources.SetFromFloat(r.node.ResourcesTotal)
	if err != nil {
		return nil, fmt.Errorf("raylet resources: %w", err)
	}
	r.bundles = newBundleTable(totals, r.node.Gpus)
	if cfg.MIG != nil && len(cfg.MIGGPUs) > 0 {
		if r.bundles.mig, err = newMIGTable(cfg, r.log); err != nil {
			return nil, fmt.Errorf("raylet MIG: %w", err)
		}
	}

	if r.gcsConn, err = rpcutil.Dial(cfg.GCSAddress, rpcutil.DialOptions{Token: cfg.AuthToken}); err != nil {
		return nil, err
	}
	var verify auth.Verifier // nil: auth off
	if cfg.AuthToken != "" {
		// No cluster token is accepted before the GCS gives its hash at registration
		// (no one has this raylet's address before): a node token is never taken for it.
		// Tenants' tokens are the GCS's to vouch for.
		gcsAuth := pb.NewAuthServiceClient(r.gcsConn)
		r.tenants = newTenantTokens(func(ctx context.Context, req *pb.AuthorizeLeaseRequest) (*pb.AuthorizeLeaseReply, error) {
			return gcsAuth.AuthorizeLease(ctx, req)
		}, cfg.TenantTokenTTL)
		r.learned.Lookup = func(presented string) (auth.Scope, bool) {
			if scope, ok := r.registrationScope(presented); ok {
				return scope, true
			}
			return r.tenants.lookup(presented)
		}
		verify = auth.ClusterTokenHash(&r.learned, cfg.AuthToken)
	}
	serverOptions, err := rpcutil.VerifiedServerOptions(rpcutil.ProtocolVersion, verify, r.scopeInterceptor, r.fenceInterceptor)
	if err != nil {
		return nil, err
	}
	r.grpc = grpc.NewServer(serverOptions...)
	pb.RegisterNodeManagerServiceServer(r.grpc, &nodeManagerService{raylet: r})
	go func() { _ = r.grpc.Serve(r.listener) }()

	r.nodes = pb.NewNodeInfoServiceClient(r.gcsConn)
	r.actors = pb.NewActorInfoServiceClient(r.gcsConn)
	var downloads context.Context
	downloads, r.stopDownloads = context.WithCancel(context.Background())
	r.executables = newExecutableCache(downloads, cfg.ExecutableCacheDir, gcsExecutables{pb.NewExecutableServiceClient(r.gcsConn)})
	if err := r.register(ctx); err != nil {
		return nil, err
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(newRayletCollector(r), newGPUActivityCollector(cfg.NodeID, &r.activity))
	r.metrics = metricsserver.ServeVerified(cfg.MetricsAddress, registry, verify, r.log, nil)
	go r.heartbeatLoop()
	go r.watchGCSConn()
	go r.idleWorkerLoop()
	if cfg.ExecutableCacheTTL > 0 {
		go r.executableCacheLoop()
	}
	if r.bundles.mig != nil {
		go r.idleMIGLoop()
	}
	if cfg.GPUActivity != nil && cfg.GPUActivityInterval > 0 {
		go r.gpuActivityLoop()
	}
	if cfg.SpotMetadataURL != "" {
		go r.watchSpotInterruption(pb.NewAutoscalerStateServiceClient(r.gcsConn))
	}
	r.log.Info().Str("raylet_address", r.node.RayletAddress).Str("gossip_address", r.node.GossipAddress).
		Str("gcs_address", cfg.GCSAddress).Interface("resources", r.node.ResourcesTotal).Msg("raylet started")
	return r, nil
}

func (r *Raylet) describeNode() *pb.NodeInfo {
	totals, gpus := detectTotals(r.cfg)
	labels := map[string]string{nodelabel.NodeID: r.cfg.NodeID}
	// The discovered GPUs, not the whole ones: a node with every GPU in MIG mode still
	// has an accelerator type.
	if len(r.cfg.GPUs) > 0 && r.cfg.GPUs[0].Model != "" {
		labels[nodelabel.AcceleratorType] = gpu.AcceleratorType(r.cfg.GPUs[0].Model)
	}
	maps.Copy(labels, r.cfg.Labels)
	hostname, err := os.Hostname()
	if err != nil {
		hostname = r.cfg.NodeIP // as Ray does when the host has no name
	}
	return &pb.NodeInfo{
		NodeId:              r.cfg.NodeID,
		NodeIp:              r.cfg.NodeIP,
		NodeName:            r.cfg.NodeName,
		NodeManagerHostname: hostname,
		IsHeadNode:          r.cfg.IsHead,
		State:               pb.NodeState_ALIVE,
		ResourcesTotal:      totals,
		ResourcesAvailable:  maps.Clone(totals),
		Labels:              labels,
		RayletAddress:       r.listener.Addr().String(),
		GossipAddress:       r.gossip.Address(),
		Gpus:                gpus,
		NvlinkDomain:        r.cfg.NVLinkDomain,
	}
}

// NodeID is this raylet's node id.
func (r *Raylet) NodeID() string { return r.cfg.NodeID }

// Address is the host:port of the raylet's gRPC server.
func (r *Raylet) Address() string { return r.listener.Addr().String() }

// Node returns the node as the raylet describes it.
func (r *Raylet) Node() *pb.NodeInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	node := proto.Clone(r.node).(*pb.NodeInfo)
	node.IsDraining = r.draining
	node.ResourcesAvailable = r.bundles.available().ToFloat()
	node.MigGpus = r.bundles.mig.report()
	return node
}

// register announces the node to the GCS, adopts its epoch and joins the memberlist
// seeds it returns.
func (r *Raylet) register(ctx context.Context) error {
	reply, err := r.nodes.RegisterNode(ctx, &pb.RegisterNodeRequest{Node: r.Node(), NodeSecret: r.secret()})
	if err != nil {
		return fmt.Errorf("register with GCS at %s: %w", r.cfg.GCSAddress, err)
	}
	if reply.NodeSecret != "" { // a first registration (or a GCS whose store started empty)
		r.mu.Lock()
		r.nodeSecret = reply.NodeSecret
		r.mu.Unlock()
	}
	r.observeEpoch(reply.GcsEpoch)
	if reply.ClusterTokenSha256 != "" && r.cfg.AuthToken != "" {
		hash := reply.ClusterTokenSha256
		r.learned.ClusterToken.Store(&hash)
	}
	if reply.GcsCredentialSha256 != "" && r.cfg.AuthToken != "" {
		// Registration after a GCS restart on the memory store brings a new credential.
		hash := reply.GcsCredentialSha256
		r.learned.GCSCredential.Store(&hash)
	}
	if len(reply.GossipKey) > 0 && r.cfg.AuthToken != "" {
		// The cluster's key: ours, derived from our token, is another when it is a node token.
		if err := r.gossip.UseKey(reply.GossipKey); err != nil {
			return fmt.Errorf("register with GCS at %s: %w", r.cfg.GCSAddress, err)
		}
	}
	if _, err := r.gossip.Join(reply.GossipSeeds); err != nil {
		r.log.Warn().Err(err).Msg("memberlist join failed; the GCS will find us through its own join")
	}
	if len(reply.GossipSeeds) > 0 {
		r.mu.Lock()
		r.gcsGossip = reply.GossipSeeds[0]
		r.mu.Unlock()
	}
	return nil
}

// secret is the node's secret from the GCS ("" before the first registration).
func (r *Raylet) secret() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nodeSecret
}

// observeEpoch records a GCS epoch seen in a reply.
func (r *Raylet) observeEpoch(epoch int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if epoch > r.epoch {
		if r.epoch != 0 {
			r.log.Info().Int64("gcs_epoch", epoch).Int64("previous_epoch", r.epoch).Msg("new GCS incarnation")
		}
		r.epoch = epoch
	}
}

// heartbeatLoop reports to the GCS: every HeartbeatInterval when its resources changed
// since the last report the GCS acknowledged, else a bare keep-alive every
// KeepAliveInterval. After a failure, or once the connection to the GCS was lost (a GCS
// restart), it reports in full every HeartbeatInterval, with backoff while the GCS is
// unreachable; it re-registers when a GCS without our row answers.
func (r *Raylet) heartbeatLoop() {
	backoff := rpcutil.Backoff{Min: 100 * time.Millisecond, Max: r.cfg.ReconnectBackoffMax}
	wait := r.cfg.HeartbeatInterval
	unreachableSince := time.Time{}
	var lastSent time.Time
	acked := int64(-1) // the resources version the GCS acknowledged; -1: report in full
	for {
		select {
		case <-r.stop:
			return
		case <-time.After(wait):
		}
		if r.gcsConnLost.Swap(false) {
			acked = -1
		}
		r.mu.Lock()
		version := r.resourcesVersion
		r.mu.Unlock()
		if version == acked && time.Since(lastSent) < r.cfg.KeepAliveInterval {
			continue
		}
		sentVersion, err := r.heartbeat(acked)
		lastSent = time.Now()
		switch {
		case err == nil:
			if !unreachableSince.IsZero() {
				r.log.Info().Dur("after", time.Since(unreachableSince)).Msg("reconnected to the GCS")
				unreachableSince = time.Time{}
			}
			acked = sentVersion
			backoff.Reset()
			wait = r.cfg.HeartbeatInterval
		case status.Code(err) == codes.FailedPrecondition && !isVersionError(err):
			r.log.Error().Err(err).Msg("the GCS declared this node dead; exiting")
			r.done <- fmt.Errorf("%w: %v", ErrNodeDead, err)
			return
		default:
			acked = -1
			if unreachableSince.IsZero() {
				unreachableSince = time.Now()
				r.log.Warn().Err(err).Msg("GCS unreachable; retrying with backoff")
			}
			wait = backoff.Next()
		}
	}
}

// watchGCSConn notes every time the connection to the GCS leaves READY: the GCS may have
// restarted (with an empty store), so the next heartbeat reports in full at once.
func (r *Raylet) watchGCSConn() {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-r.stop; cancel() }()
	state := r.gcsConn.GetState()
	for r.gcsConn.WaitForStateChange(ctx, state) {
		state = r.gcsConn.GetState()
		if state != connectivity.Ready {
			r.gcsConnLost.Store(true)
		}
	}
}

// isVersionError tells a protocol mismatch (the operator must upgrade one side) from
// the GCS's verdict that this node is dead.
func isVersionError(err error) bool {
	return strings.Contains(status.Convert(err).Message(), "protocol version")
}

// heartbeat sends one report: a keep-alive when the resources are still at version
// acked, else in full. It returns the version the GCS now has.
func (r *Raylet) heartbeat(acked int64) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r.mu.Lock()
	var request *pb.ReportHeartbeatRequest
	version := r.resourcesVersion
	if version == acked {
		request = keepAliveRequest(r.cfg.NodeID, version, r.node.GossipAddress)
	} else {
		request = heartbeatRequest(r.cfg.NodeID, r.resourceReportLocked(), r.node.GossipAddress)
	}
	request.NodeSecret = r.nodeSecret
	r.mu.Unlock()
	request.IdleGpus, request.GpuActivity = r.activity.idleGPUs(), r.activity.reported()
	reply, err := r.nodes.ReportHeartbeat(ctx, request)
	if status.Code(err) == codes.NotFound {
		// A GCS on a fresh store (the memory store after a restart) does not know us.
		// Registering reports the resources in full; the next heartbeat does it again.
		return -1, r.register(ctx)
	}
	if err != nil {
		return -1, err
	}
	r.observeEpoch(reply.GcsEpoch)
	r.mu.Lock()
	rejoin := reply.GcsGossipAddress != "" && reply.GcsGossipAddress != r.gcsGossip
	r.gcsGossip = reply.GcsGossipAddress
	r.mu.Unlock()
	if rejoin {
		// A restarted GCS gossips on a new port; join it in case its own join missed us.
		if _, err := r.gossip.Join([]string{reply.GcsGossipAddress}); err != nil {
			r.log.Warn().Err(err).Msg("could not join the GCS's memberlist")
		}
	}
	if reply.SendFullReport {
		return -1, nil
	}
	return version, nil
}

// gcsOnlyMethods are the calls a raylet takes from the GCS alone (its own credential,
// ScopeGCS): the 2PC, drains and a finished job's worker kill. Any call carrying a GCS
// epoch is the GCS's too (scopeInterceptor).
var gcsOnlyMethods = map[string]bool{
	pb.NodeManagerService_PrepareBundleResources_FullMethodName: true,
	pb.NodeManagerService_CommitBundleResources_FullMethodName:  true,
	pb.NodeManagerService_CancelResourceReserve_FullMethodName:  true,
	pb.NodeManagerService_ReleaseUnusedBundles_FullMethodName:   true,
	pb.NodeManagerService_DrainRaylet_FullMethodName:            true,
	pb.NodeManagerService_KillJobWorkers_FullMethodName:         true,
}

// namesLessee reports whether req is a lease naming whose token its worker takes: the
// GCS's to say, for a tenant's actor.
func namesLessee(req any) bool {
	lease, ok := req.(*pb.RequestWorkerLeaseRequest)
	return ok && lease.LesseeTokenSha256 != ""
}

// scopeInterceptor decides, with auth on, which credential reaches which call: the
// GCS's own (ScopeGCS) alone the gcsOnlyMethods and every call carrying an epoch, so a
// holder of the cluster token can neither reserve nor release behind the GCS's back nor
// fence the real GCS out with a forged epoch; the raylet's own token, when it is not the
// cluster token (a node token, which its workers hold), RegisterWorker alone; the
// cluster token (or the GCS's) the rest: worker leases, stats; a tenant's token, which the
// GCS vouches for, its own task leases (authorizeTenant). It runs before
// fenceInterceptor, so a refused call's epoch is never observed.
func (r *Raylet) scopeInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if r.cfg.AuthToken == "" {
		return handler(ctx, req) // auth off: every call is admin's
	}
	scope := auth.ScopeFrom(ctx)
	_, carriesEpoch := rpcutil.EpochFromIncoming(ctx)
	switch {
	case scope.Kind == auth.ScopeGCS:
		return handler(ctx, req)
	case gcsOnlyMethods[info.FullMethod] || carriesEpoch || namesLessee(req):
		return nil, status.Errorf(codes.PermissionDenied, "%s takes the GCS's own credential alone (with a GCS epoch only the GCS sends); the %s token this call carried does not reach it", info.FullMethod, scope.Kind)
	case scope.IsTenant():
		ctx, err := r.authorizeTenant(ctx, scope, info.FullMethod, req)
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	case scope.Kind == auth.ScopeNode && info.FullMethod != pb.NodeManagerService_RegisterWorker_FullMethodName:
		return nil, status.Errorf(codes.PermissionDenied, "%s needs the cluster token; this raylet's own (node) token only registers its workers", info.FullMethod)
	}
	return handler(ctx, req)
}

// fenceInterceptor refuses requests from a GCS older than the newest one seen.
func (r *Raylet) fenceInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if epoch, ok := rpcutil.EpochFromIncoming(ctx); ok {
		r.mu.Lock()
		current := r.epoch
		if epoch > r.epoch {
			r.epoch = epoch
		}
		r.mu.Unlock()
		if epoch < current {
			return nil, nodeManagerStatus(fmt.Errorf("%w %d: this raylet has seen epoch %d", ErrStaleEpoch, epoch, current))
		}
	}
	return handler(ctx, req)
}

// Wait blocks until the raylet stops on its own (the GCS declared it dead) or ctx ends.
func (r *Raylet) Wait(ctx context.Context) error {
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stop kills every worker, unregisters from the GCS (best effort, bounded), leaves
// memberlist and stops.
func (r *Raylet) Stop() {
	r.stopOnce.Do(func() {
		close(r.stop)
		r.stopWorkers()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, err := r.nodes.UnregisterNode(ctx, &pb.UnregisterNodeRequest{NodeId: r.cfg.NodeID, NodeSecret: r.secret()}); err != nil {
			r.log.Warn().Err(err).Msg("could not unregister from the GCS")
		}
		r.gossip.Leave(time.Second)
		r.closeAll()
		r.log.Info().Msg("raylet stopped")
	})
}

func (r *Raylet) closeAll() {
	if r.stopDownloads != nil {
		r.stopDownloads()
	}
	if r.grpc != nil {
		r.grpc.Stop()
	}
	if r.listener != nil {
		_ = r.listener.Close()
	}
	if r.gossip != nil {
		r.gossip.Shutdown()
	}
	r.metrics.Close()
	if r.gcsConn != nil {
		_ = r.gcsConn.Close()
	}
}

// resourceReportLocked is the available resources and the MIG slot maps at the current
// version. Callers hold mu.
func (r *Raylet) resourceReportLocked() *pb.ResourceReport {
	return &pb.ResourceReport{ResourcesAvailable: r.bundles.available().ToFloat(), Version: r.resourcesVersion, MigGpus: r.bundles.mig.report()}
}

// changeBundles runs a change of the bundle table under mu and returns the resource
// report after it. A refused change that still changed MIG instances (destroyed or
// carved before a later step failed) bumps the version too.
func (r *Raylet) changeBundles(change func() error) (*pb.ResourceReport, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := change()
	if r.bundles.mig.takeChanged() || err == nil {
		r.resourcesChangedLocked()
	}
	if err != nil {
		return nil, err
	}
	return r.resourceReportLocked(), nil
}

// idleMIGLoop destroys MIG instances idle for MIGIdleTimeout, until Stop.
func (r *Raylet) idleMIGLoop() {
	r.everyFractionOf(r.cfg.MIGIdleTimeout, func(time.Time) {
		r.mu.Lock()
		if r.bundles.mig.reapIdle() > 0 && r.bundles.mig.takeChanged() {
			r.resourcesVersion++
		}
		r.mu.Unlock()
	})
}

// everyFractionOf calls tick a few times per timeout (at most every 5 s, at least every
// 10 ms) until Stop, so what has been idle for timeout goes within a quarter of it.
func (r *Raylet) everyFractionOf(timeout time.Duration, tick func(now time.Time)) {
	ticker := time.NewTicker(min(max(timeout/4, 10*time.Millisecond), 5*time.Second))
	defer ticker.Stop()
	for {
		select {
		case <-r.stop:
			return
		case now := <-ticker.C:
			tick(now)
		}
	}
}
