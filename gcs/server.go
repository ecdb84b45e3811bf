package gcs

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/auth"
	"github.com/raygo-dev/raygo/internal/membership"
	"github.com/raygo-dev/raygo/internal/metricsserver"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// metaKeyEpoch is the key in store.TableMeta of the last GCS epoch.
const metaKeyEpoch = "epoch"

// metaKeyGCSCredential is the key in store.TableMeta of the GCS's own credential
// (gcsCredential).
const metaKeyGCSCredential = "gcs_credential"

// Server is a running GCS.
type Server struct {
	cfg       Config
	log       zerolog.Logger
	store     store.Store
	epoch     int64
	startTime time.Time

	listener net.Listener
	grpc     *grpc.Server
	health   *health.Server
	gossip   *membership.Agent

	nodes *nodeManager
	jobs  *jobManager
	kv    *kvService
	pgs   *pgManager
	// actors and executables: the actor manager and the worker executables it starts.
	actors      *actorManager
	executables *executableService
	// autoscaler serves the autoscaler's view of the cluster (autoscaler_state.go).
	autoscaler *autoscalerState
	// tokens are the scoped tokens issued (auth_tokens.go).
	tokens *tokenRegistry

	// dashboard serves /metrics and the dashboard (Config.DashboardAddress); nil when
	// not served.
	dashboard *metricsserver.Server

	stopOnce sync.Once
	stopped  chan struct{}
}

// Start opens the store's tables, takes the next epoch, binds the gRPC and memberlist
// ports and serves until Stop. On error nothing is left running (the store is closed).
func Start(ctx context.Context, cfg Config) (_ *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, store: cfg.Store, log: cfg.Logger, startTime: cfg.Now(), stopped: make(chan struct{})}
	defer func() {
		if err != nil {
			s.closeAll()
		}
	}()

	s.listener, err = net.Listen("tcp", net.JoinHostPort(cfg.NodeIP, strconv.Itoa(cfg.Port)))
	if err != nil {
		return nil, fmt.Errorf("gcs listen on %s:%d: %w", cfg.NodeIP, cfg.Port, err)
	}
	var fresh bool
	if s.epoch, fresh, err = nextEpoch(ctx, cfg.Store, s.startTime); err != nil {
		return nil, err
	}
	if fresh {
		// A new store (the memory store after every restart): job ids start at a random
		// number, so a driver of an earlier incarnation never names a new driver's job.
		if _, err := cfg.Store.Increment(ctx, store.TableMeta, metaKeyJobCounter, randomJobCounterBase()); err != nil {
			return nil, fmt.Errorf("seed the job counter: %w", err)
		}
	}
	s.log = s.log.With().Int64("gcs_epoch", s.epoch).Logger()
	var credential string
	if cfg.AuthToken != "" {
		if credential, err = gcsCredential(ctx, cfg.Store); err != nil {
			return nil, err
		}
	}

	s.nodes = newNodeManager(nodeDeps{store: cfg.Store, log: s.log, now: cfg.Now, epoch: s.epoch, startTime: s.startTime,
		reconnectGrace: cfg.ReconnectGrace, gossipAddress: func() string { return s.gossip.Address() }, authToken: cfg.AuthToken, gcsCredential: credential, nodeTimeout: cfg.NodeTimeout,
		dashboardAddress: func() string { return s.DashboardAddress() }})
	s.jobs = newJobManager(cfg.Store, s.log, cfg.Now, cfg.JobLeaseTimeout)
	s.kv = &kvService{store: cfg.Store, log: s.log}
	var reserver BundleReserver = rayletReserver{nodes: s.nodes}
	if cfg.WrapReserver != nil {
		reserver = cfg.WrapReserver(reserver)
	}
	queueConfig, err := s.loadQueueConfig(ctx, cfg.Queues)
	if err != nil {
		return nil, fmt.Errorf("gcs queue configuration: %w", err)
	}
	s.pgs = newPGManager(pgDeps{queues: queueConfig, store: cfg.Store, nodes: s.nodes, jobs: s.jobs, reserver: reserver, now: cfg.Now, log: s.log, stopped: s.stopped, metrics: newPGMetrics()})
	s.executables = newExecutableService(cfg, s.startTime, s.log)
	s.actors = newActorManager(actorDeps{store: cfg.Store, nodes: s.nodes, groups: s.pgs, jobs: s.jobs, executables: s.executables, leases: s.pgs,
		now: cfg.Now, log: s.log, deadActorRetention: cfg.DeadActorRetention, maxDeadActors: cfg.MaxDeadActors, gcsCredentialSHA256: credentialSHA256(credential),
		freeFunctions: s.kv.deleteFunctions})
	s.kv.holders = s.actors
	s.autoscaler = newAutoscalerState(autoscalerDeps{store: cfg.Store, log: s.log, now: cfg.Now, nodes: s.nodes, groups: s.pgs, actors: s.actors,
		sessionName: "session_" + strconv.FormatInt(s.epoch, 10)})
	// The managers meet only through these subscriptions (events.go).
	s.nodes.subscribe(s.pgs)
	s.nodes.subscribe(s.actors)
	// Actors first: a finished job's actors die as "the job that owns it finished",
	// not as members of the groups removed with it.
	s.jobs.subscribe(s.actors)
	s.jobs.subscribe(s.pgs)
	s.jobs.subscribe(s.kv) // a finished job's Python functions
	s.pgs.subscribe(s.actors)
	reloaded, err := s.nodes.load(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.jobs.load(ctx); err != nil {
		return nil, err
	}
	preparedGroups, err := s.pgs.load(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.actors.load(ctx); err != nil {
		return nil, err
	}
	if err := s.autoscaler.load(ctx); err != nil {
		return nil, err
	}

	mcfg := cfg.Membership
	mcfg.Name = "gcs-" + strconv.FormatInt(s.epoch, 10)
	mcfg.BindIP = cfg.NodeIP
	mcfg.Port = cfg.GossipPort
	mcfg.Meta = membership.Meta{Kind: "gcs"}
	if cfg.AuthToken != "" {
		mcfg.SecretKey = auth.GossipKey(cfg.AuthToken)
	}
	if s.gossip, err = membership.Start(mcfg, s.nodes); err != nil {
		return nil, err
	}
	if seeds := s.nodes.gossipSeeds(); len(seeds) > 0 {
		// Seeding from the node table lets a restarted GCS rejoin the raylets' gossip at
		// once; raylets also join us when their heartbeat names our new address.
		if _, err := s.gossip.Join(seeds); err != nil {
			s.log.Warn().Err(err).Msg("could not rejoin any reloaded node's memberlist yet")
		}
	}

	s.tokens = newTokenRegistry(cfg.Store, cfg.AuthToken, cfg.Now)
	if err := s.tokens.load(ctx); err != nil {
		return nil, err
	}
	tenants := newTenancy(s.pgs, s.actors, s.jobs)
	s.tokens.authorizeLease = tenants.authorizeLease
	serverOptions, err := rpcutil.VerifiedServerOptions(rpcutil.ProtocolVersion, s.tokens.verifier(), tenants.unary)
	if err != nil {
		return nil, err
	}
	serverOptions = append(serverOptions, grpc.ChainStreamInterceptor(tenants.stream))
	s.grpc = grpc.NewServer(append(serverOptions, statusInterceptors()...)...)
	pb.RegisterAuthServiceServer(s.grpc, s.tokens)
	pb.RegisterNodeInfoServiceServer(s.grpc, s.nodes)
	pb.RegisterInternalKVServiceServer(s.grpc, s.kv)
	pb.RegisterJobInfoServiceServer(s.grpc, s.jobs)
	pb.RegisterPlacementGroupServiceServer(s.grpc, s.pgs)
	pb.RegisterQueueServiceServer(s.grpc, s.queueService())
	pb.RegisterActorInfoServiceServer(s.grpc, s.actors)
	pb.RegisterExecutableServiceServer(s.grpc, s.executables)
	pb.RegisterAutoscalerStateServiceServer(s.grpc, s.autoscaler)
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.grpc, s.health)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	go func() { _ = s.grpc.Serve(s.listener) }()

	s.nodes.startReconnectGrace(reloaded)
	go s.nodes.watchReports()
	go s.jobs.reapLoop(s.stopped)
	go s.pgs.recoverPrepared(preparedGroups)
	go s.pgs.loop(s.stopped)
	go s.actors.loop(s.stopped)
	go s.collectExecutablesLoop(s.stopped)
	registry := prometheus.NewRegistry()
	registry.MustRegister(newTableCollector(s), s.pgs.metrics.decisionSeconds, s.pgs.metrics.commits)
	// As Ray's dashboard: a port already taken is a warning, not a failure.
	s.dashboard = metricsserver.ServeVerified(cfg.DashboardAddress, registry, s.tokens.verifier(), s.log, newDashboard(dashboardSources{
		nodes: s.nodes, groups: s.pgs, actors: s.actors, jobs: s.jobs, queues: s.queueService(), autoscaler: s.autoscaler, metrics: registry, tenants: tenants}))
	s.log.Info().Str("address", s.Address()).Str("gossip_address", s.gossip.Address()).
		Str("store", cfg.Store.Name()).Int("reloaded_nodes", reloaded).Msg("GCS started")
	return s, nil
}

// nextEpoch persists and returns the epoch of this GCS start. A store with no epoch yet
// starts from the start time in milliseconds, so a raylet that outlived a GCS on the
// non-durable memory store still sees the next GCS's epoch as newer.
func nextEpoch(ctx context.Context, st store.Store, now time.Time) (epoch int64, fresh bool, err error) {
	current, err := st.Increment(ctx, store.TableMeta, metaKeyEpoch, 0)
	if err != nil {
		return 0, false, fmt.Errorf("read GCS epoch: %w", err)
	}
	delta := int64(1)
	if current == 0 {
		delta = now.UnixMilli()
	}
	epoch, err = st.Increment(ctx, store.TableMeta, metaKeyEpoch, delta)
	if err != nil {
		return 0, false, fmt.Errorf("persist GCS epoch: %w", err)
	}
	return epoch, current == 0, nil
}

// credentialSHA256 is the SHA-256 of the GCS's credential, "" without one (auth off).
func credentialSHA256(credential string) string {
	if credential == "" {
		return ""
	}
	return auth.HashToken(credential)
}

// gcsCredential returns the GCS's own credential, made at the first start with auth on
// and kept in the store: a restarted GCS on the same store reconciles with raylets (the
// 2PC, ReleaseUnusedBundles) before they register again, so they must still take it.
// Raylets get only its hash; it is never logged nor given to a token holder.
func gcsCredential(ctx context.Context, st store.Store) (string, error) {
	made, err := auth.Generate()
	if err != nil {
		return "", err
	}
	if _, err := st.PutIfAbsent(ctx, store.TableMeta, metaKeyGCSCredential, []byte(made)); err != nil {
		return "", fmt.Errorf("persist the GCS's credential: %w", err)
	}
	kept, found, err := st.Get(ctx, store.TableMeta, metaKeyGCSCredential)
	if err != nil {
		return "", fmt.Errorf("read the GCS's credential: %w", err)
	}
	if !found || len(kept) == 0 {
		return "", fmt.Errorf("read the GCS's credential: %w: the store kept no value", errDataLoss)
	}
	return string(kept), nil
}

// randomJobCounterBase is where a new store's job numbers start: a random number in
// [2^24, 2^30), leaving room for a billion jobs before Ray's 4-byte job id wraps.
func randomJobCounterBase() int64 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return 1<<24 + int64(binary.LittleEndian.Uint32(b[:])%(1<<30-1<<24))
}

// Address is the host:port of the gRPC server.
func (s *Server) Address() string { return s.listener.Addr().String() }

// GossipAddress is the host:port of the GCS's memberlist agent.
func (s *Server) GossipAddress() string { return s.gossip.Address() }

// Epoch is this incarnation's epoch.
func (s *Server) Epoch() int64 { return s.epoch }

// Stop shuts the server down gracefully: pending RPCs finish, memberlist leaves, the
// store is closed.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		close(s.stopped)
		if s.health != nil {
			s.health.Shutdown()
		}
		if s.grpc != nil {
			stopped := make(chan struct{})
			go func() { s.grpc.GracefulStop(); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(5 * time.Second):
				s.grpc.Stop()
			}
		}
		if s.gossip != nil {
			s.gossip.Leave(time.Second)
		}
		s.dashboard.Close()
		s.closeAll()
		s.log.Info().Msg("GCS stopped")
	})
}

func (s *Server) closeAll() {
	if s.actors != nil {
		s.actors.close()
	}
	if s.nodes != nil {
		s.nodes.close()
	}
	if s.listener != nil {
		_ = s.listener.Close()
	}
	if s.gossip != nil {
		s.gossip.Shutdown()
	}
	_ = s.store.Close()
}
