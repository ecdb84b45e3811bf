package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/rs/zerolog"

	"github.com/raygo-dev/raygo/admission/queues"
	"github.com/raygo-dev/raygo/gcs"
	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/gcheadroom"
	"github.com/raygo-dev/raygo/internal/logging"
	"github.com/raygo-dev/raygo/internal/pprofserve"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/raylet"
	"github.com/raygo-dev/raygo/raylet/gpu"
	"github.com/raygo-dev/raygo/raylet/gpu/gpusim"
)

// storeFlags select and configure the GCS's store (shared by start and gcs-server).
type storeFlags struct {
	backend        string
	redisAddress   string
	redisUsername  string
	redisPassword  string
	redisNamespace string
	// redisTLS and the files: TLS to Redis (its tls-port); the certificate and key are
	// the client's, for a Redis that requires one (tls-auth-clients, its default).
	redisTLS                                  bool
	redisTLSCACert, redisTLSCert, redisTLSKey string
	// allowVolatileRedis runs on a Redis without its append-only file.
	allowVolatileRedis bool
	// identityFile keeps the store's UUID across GCS restarts (--store-identity-file).
	identityFile string
}

func (f *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.backend, "store", "memory", "GCS state store: memory (embedded, lost with the GCS) or redis (durable)")
	fs.StringVar(&f.redisAddress, "redis-address", "127.0.0.1:6379", "Redis HOST:PORT for --store redis")
	fs.StringVar(&f.redisUsername, "redis-username", "", "Redis ACL user for --store redis, whose password is --redis-password (default: "+envRedisUsername+", else Redis' default user)")
	fs.StringVar(&f.redisPassword, "redis-password", "", "Redis password for --store redis (default: "+envRedisPassword+"; prefer it: ps shows every process's command line)")
	fs.BoolVar(&f.redisTLS, "redis-tls", false, "with --store redis: connect to Redis with TLS (its tls-port); implied by the --redis-tls-* files")
	fs.StringVar(&f.redisTLSCACert, "redis-tls-ca-cert", "", "with --store redis: PEM file of the CA that signed Redis' certificate (default: the system's roots)")
	fs.StringVar(&f.redisTLSCert, "redis-tls-cert", "", "with --store redis: PEM certificate this client presents to Redis (Redis asks for one unless tls-auth-clients is no); with --redis-tls-key")
	fs.StringVar(&f.redisTLSKey, "redis-tls-key", "", "with --store redis: the PEM key of --redis-tls-cert")
	fs.StringVar(&f.redisNamespace, "redis-namespace", "raygo", "prefix of the GCS's Redis keys, so clusters can share one Redis")
	fs.StringVar(&f.identityFile, "store-identity-file", "", "with --store redis: a file keeping the UUID of the store this cluster uses and the last write the GCS acknowledged; a GCS restarted on a Redis that came back empty or rolled back then refuses to start instead of serving a new or older table (raygo start passes one in the session directory)")
	fs.BoolVar(&f.allowVolatileRedis, "allow-volatile-redis", false, "with --store redis: run even though Redis keeps no append-only file (appendonly no) or its settings cannot be read; a Redis restart then loses acknowledged work")
}

// envRedisPassword carries the Redis password to the GCS: the supervisor never puts it
// on a command line, where any local user could read it (ps).
const envRedisPassword = "RAYGO_REDIS_PASSWORD"

// envRedisUsername is the default of --redis-username.
const envRedisUsername = "RAYGO_REDIS_USERNAME"

// validate checks the flags without connecting. The password is --redis-password, else
// RAYGO_REDIS_PASSWORD; it is left in the environment, from which a GCS this process
// starts takes it (args never names it).
func (f *storeFlags) validate() error {
	if f.redisPassword == "" {
		f.redisPassword = os.Getenv(envRedisPassword)
	} else if err := os.Setenv(envRedisPassword, f.redisPassword); err != nil {
		return err
	}
	if f.redisUsername == "" {
		f.redisUsername = os.Getenv(envRedisUsername)
	}
	if f.redisTLSCACert != "" || f.redisTLSCert != "" || f.redisTLSKey != "" {
		f.redisTLS = true
	}
	switch f.backend {
	case "memory":
		return nil
	case "redis":
		if err := checkHostPort(f.redisAddress); err != nil {
			return badInput("--redis-address %q: %v", f.redisAddress, err)
		}
		if f.redisNamespace == "" {
			return badInput("--redis-namespace: must not be empty")
		}
		if f.redisUsername != "" && f.redisPassword == "" {
			return badInput("--redis-username %s: needs its password (%s, or --redis-password)", f.redisUsername, envRedisPassword)
		}
		_, err := f.tlsConfig()
		return err
	}
	return badInput("--store %q: must be memory or redis", f.backend)
}

// open connects the store; an unreachable Redis is bad input naming the address.
func (f *storeFlags) open(ctx context.Context) (store.Store, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	if f.backend == "memory" {
		return store.NewMemory(), nil
	}
	cfg := store.DefaultRedisConfig()
	cfg.Address, cfg.Username, cfg.Password, cfg.Namespace = f.redisAddress, f.redisUsername, f.redisPassword, f.redisNamespace
	var err error
	if cfg.TLS, err = f.tlsConfig(); err != nil {
		return nil, err
	}
	cfg.IdentityFile = f.identityFile
	st, err := store.NewRedis(ctx, cfg)
	if errors.Is(err, store.ErrStoreLost) {
		return nil, err
	}
	if errors.Is(err, store.ErrIdentityFile) {
		return nil, badInput("--store-identity-file: %v", err)
	}
	if err != nil {
		return nil, badInput("--redis-address %s: Redis unreachable: %v", f.redisAddress, err)
	}
	if err := f.checkPersistence(ctx, st); err != nil {
		_ = st.Close()
		return nil, err
	}
	return st, nil
}

// tlsConfig is the client side of TLS to Redis: nil without --redis-tls; else the CA
// file's certificates (the system's roots without one) and the client certificate when
// given. An unusable file is bad input naming its flag.
func (f *storeFlags) tlsConfig() (*tls.Config, error) {
	if !f.redisTLS {
		return nil, nil
	}
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.redisTLSCACert != "" {
		pem, err := os.ReadFile(f.redisTLSCACert)
		if err != nil {
			return nil, badInput("--redis-tls-ca-cert: %v", err)
		}
		config.RootCAs = x509.NewCertPool()
		if !config.RootCAs.AppendCertsFromPEM(pem) {
			return nil, badInput("--redis-tls-ca-cert %s: no PEM certificate in it", f.redisTLSCACert)
		}
	}
	if (f.redisTLSCert == "") != (f.redisTLSKey == "") {
		return nil, badInput("--redis-tls-cert and --redis-tls-key go together")
	}
	if f.redisTLSCert != "" {
		cert, err := tls.LoadX509KeyPair(f.redisTLSCert, f.redisTLSKey)
		if err != nil {
			return nil, badInput("--redis-tls-cert / --redis-tls-key: %v", err)
		}
		config.Certificates = []tls.Certificate{cert}
	}
	return config, nil
}

// checkPersistence refuses a Redis that would lose acknowledged work when it restarts
// (no append-only file), or whose settings cannot be read, unless --allow-volatile-redis;
// it warns when a host crash could lose the last second (appendfsync other than always).
func (f *storeFlags) checkPersistence(ctx context.Context, st *store.Redis) error {
	const fix = "start redis-server with --appendonly yes --appendfsync always, or pass --allow-volatile-redis to accept the loss"
	p, err := st.Persistence(ctx)
	switch {
	case err != nil && !f.allowVolatileRedis:
		return badInput("--store redis: cannot verify that Redis at %s persists what it acknowledges (%v); %s", f.redisAddress, err, fix)
	case err == nil && !p.AppendOnly && !f.allowVolatileRedis:
		return badInput("--store redis: Redis at %s runs with appendonly no, so a Redis restart would lose acknowledged placement groups, actors and jobs; %s", f.redisAddress, fix)
	case err == nil && p.AppendOnly && p.Fsync != "always":
		fmt.Fprintf(os.Stderr, "raygo: warning: Redis at %s runs with appendfsync %s: a host crash can lose up to a second of acknowledged work; appendfsync always loses none\n", f.redisAddress, p.Fsync)
	}
	return nil
}

// args are the flags for the GCS's command line; the password is not among them: the
// GCS inherits it in RAYGO_REDIS_PASSWORD (validate).
func (f *storeFlags) args() []string {
	return []string{"--store", f.backend, "--redis-address", f.redisAddress, "--redis-namespace", f.redisNamespace,
		"--allow-volatile-redis=" + strconv.FormatBool(f.allowVolatileRedis), "--redis-username", f.redisUsername,
		"--redis-tls=" + strconv.FormatBool(f.redisTLS), "--redis-tls-ca-cert", f.redisTLSCACert,
		"--redis-tls-cert", f.redisTLSCert, "--redis-tls-key", f.redisTLSKey}
}

// logFlags configure a daemon's logging and profiling.
type logFlags struct {
	level string
	file  string
	pprof string
}

func (f *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.level, "log-level", "info", "log level: "+logging.Levels)
	fs.StringVar(&f.file, "log-file", "", "write JSON-lines logs to this file (default: stderr)")
	fs.StringVar(&f.pprof, "pprof", "", "serve Go's profiler (/debug/pprof/) on this loopback HOST:PORT, e.g. 127.0.0.1:6060 (default: off)")
}

// startPprof serves the profiler when --pprof asks for it.
func (f *logFlags) startPprof(log zerolog.Logger) error {
	if f.pprof == "" {
		return nil
	}
	addr, err := pprofserve.Start(f.pprof)
	if err != nil {
		return badInput("%v", err)
	}
	log.Info().Str("address", addr).Msg("profiler serving /debug/pprof/")
	return nil
}

func (f *logFlags) logger(component string, stderr io.Writer) (zerolog.Logger, func(), error) {
	level, err := logging.ParseLevel(f.level)
	if err != nil {
		return zerolog.Nop(), nil, badInput("%v", err)
	}
	if f.file == "" {
		return logging.New(stderr, level, component), func() {}, nil
	}
	file, err := logging.OpenFile(f.file)
	if err != nil {
		return zerolog.Nop(), nil, badInput("--log-file: %v", err)
	}
	return logging.New(file, level, component), func() { _ = file.Close() }, nil
}

// loadQueues reads a queue configuration file ("" for none).
func loadQueues(path string) (*queues.Config, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, badInput("--queues: %v", err)
	}
	cfg, err := queues.Load(data)
	if err != nil {
		return nil, badInput("--queues %s: %v", path, err)
	}
	return cfg, nil
}

// signalContext ends on SIGTERM or SIGINT.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
}

func runGCSServer(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("gcs-server", "Run the GCS in the foreground until SIGTERM. `raygo start --head` runs it for you.",
		"  raygo gcs-server --port 6380 --store redis --redis-address 127.0.0.1:6379\n", stdout)
	var sf storeFlags
	var lf logFlags
	sf.register(fs)
	lf.register(fs)
	ip := fs.String("node-ip-address", "127.0.0.1", "address to bind to and advertise")
	port := fs.Int("port", gcs.DefaultPort, "gRPC port")
	gossipPort := fs.Int("gossip-port", 0, "memberlist port (0: a free one)")
	grace := fs.Duration("reconnect-grace", 30*time.Second, "after a restart, how long reloaded nodes have to reconnect before they are DEAD (one whose raylet address refuses connections: from a tenth of this on)")
	nodeTimeout := fs.Duration("node-timeout", 30*time.Second, "a node that sends no heartbeat for this long is DEAD (raylets send one every 5 s at least); 0 turns the check off")
	dashboardHost := fs.String("dashboard-host", "127.0.0.1", "address the dashboard port (/metrics) binds to")
	dashboardPort := fs.Int("dashboard-port", 8265, "dashboard port, serving the dashboard, Ray's state API (/api/v0/...) and /metrics (0: a free one, -1: none); one already taken is a warning")
	lease := fs.Duration("job-lease-timeout", 30*time.Second, "a driver that does not renew its job lease for this long is dead")
	queuesFile := fs.String("queues", "", "queue configuration (YAML, Kueue's field names): placement groups are admitted into queues with quotas before they are placed (default: no queues, groups are placed as they come)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	log, closeLog, err := lf.logger("gcs", stderr)
	if err != nil {
		return err
	}
	defer closeLog()
	if err := lf.startPprof(log); err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	gcheadroom.Keep(ctx, gcheadroom.DefaultHeadroom)
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	cfg := gcs.DefaultConfig()
	cfg.NodeIP, cfg.Port, cfg.GossipPort, cfg.Store = *ip, *port, *gossipPort, st
	if cfg.AuthToken, err = daemonToken(*ip); err != nil {
		return err
	}
	cfg.ReconnectGrace, cfg.JobLeaseTimeout, cfg.Logger = *grace, *lease, log
	if *nodeTimeout < 0 {
		return badInput("--node-timeout %s: must not be negative", *nodeTimeout)
	}
	cfg.NodeTimeout = *nodeTimeout
	if *dashboardPort < -1 || *dashboardPort > 65535 {
		return badInput("--dashboard-port %d: must be from 0 to 65535, or -1 for none", *dashboardPort)
	}
	if *dashboardPort >= 0 {
		if net.ParseIP(*dashboardHost) == nil {
			return badInput("--dashboard-host %q: not an IP address", *dashboardHost)
		}
		cfg.DashboardAddress = net.JoinHostPort(*dashboardHost, strconv.Itoa(*dashboardPort))
	}
	if _, err := loadQueues(*queuesFile); err != nil {
		return err
	}
	if *queuesFile != "" {
		if cfg.Queues, err = os.ReadFile(*queuesFile); err != nil {
			return badInput("--queues: %v", err)
		}
	}
	if hookFile := os.Getenv(testHookPauseAfterPrepareEnv); hookFile != "" {
		cfg.WrapReserver = func(r gcs.BundleReserver) gcs.BundleReserver {
			return pauseCommitsWhileFileExists{BundleReserver: r, path: hookFile, log: log}
		}
	}
	server, err := gcs.Start(ctx, cfg)
	if err != nil {
		return err
	}
	var lost <-chan struct{}
	if r, ok := st.(*store.Redis); ok {
		lost = r.Lost()
	}
	select {
	case <-ctx.Done():
	case <-lost:
		// Serving on would serve a partial or old table as if it were whole.
		err := st.(*store.Redis).LostErr()
		log.Error().Err(err).Msg("stopping: the store no longer holds what this GCS acknowledged; restore Redis's data (its append-only file) and restart")
		server.Stop()
		return err
	}
	server.Stop()
	return nil
}

// testHookPauseAfterPrepareEnv names a file: while it exists, the GCS stops every
// placement group between PREPARED and commit (after writing <file>.reached), so a test
// can kill it there. Tests only.
const testHookPauseAfterPrepareEnv = "RAYGO_TEST_PAUSE_AFTER_PREPARE_FILE"

// pauseCommitsWhileFileExists holds every commit of the two-phase reservation (the GCS
// commits only once the group is persisted PREPARED) while its file exists.
type pauseCommitsWhileFileExists struct {
	gcs.BundleReserver
	path string
	log  zerolog.Logger
}

func (p pauseCommitsWhileFileExists) Commit(ctx context.Context, nodeID string, bundles []*pb.BundleKey) (*pb.ResourceReport, error) {
	if _, err := os.Stat(p.path); err == nil && len(bundles) > 0 {
		id := bundles[0].PlacementGroupId
		p.log.Warn().Str("pg_id", id).Str("file", p.path).Msg("test hook: pausing between prepare and commit")
		_ = os.WriteFile(p.path+".reached", []byte(id), 0o644)
		for {
			if _, err := os.Stat(p.path); err != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return p.BundleReserver.Commit(ctx, nodeID, bundles)
}

func runRaylet(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("raylet", "Run a raylet in the foreground until SIGTERM. `raygo start` runs it for you.",
		"  raygo raylet --address 127.0.0.1:6380 --num-cpus 8\n", stdout)
	var rf nodeResourceFlags
	var lf logFlags
	rf.register(fs)
	lf.register(fs)
	address := addressFlag(fs)
	ip := fs.String("node-ip-address", "127.0.0.1", "address to bind to and advertise")
	port := fs.Int("port", 0, "gRPC port (0: a free one)")
	gossipPort := fs.Int("gossip-port", 0, "memberlist port (0: a free one)")
	nodeID := fs.String("node-id", "", "node id (default: a new random one)")
	nodeName := fs.String("node-name", "", "node name (default: the node IP)")
	head := fs.Bool("head", false, "this raylet is the head node's")
	gpuSimDir := fs.String("gpu-sim-dir", os.TempDir(), "with --gpu-sim: where the simulated PCI tree (sysfs) is written")
	metricsPort := fs.Int("metrics-export-port", -1, "/metrics port on --node-ip-address (0: a free one, -1: none)")
	workerLogDir := fs.String("worker-log-dir", "", "where worker processes write worker-<id>.out and .err (default: the raylet's own output)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	gcsAddress, err := resolveAddress(*address)
	if err != nil {
		return err
	}
	resources, labels, err := rf.resolve()
	if err != nil {
		return err
	}
	log, closeLog, err := lf.logger("raylet", stderr)
	if err != nil {
		return err
	}
	defer closeLog()
	if err := lf.startPprof(log); err != nil {
		return err
	}
	cfg := raylet.DefaultConfig()
	cfg.NodeID, cfg.NodeIP, cfg.Port, cfg.GossipPort = *nodeID, *ip, *port, *gossipPort
	cfg.GCSAddress, cfg.NodeName, cfg.IsHead = gcsAddress, *nodeName, *head
	cfg.Resources, cfg.Labels, cfg.Logger = resources, labels, log
	cfg.WorkerLogDir = *workerLogDir
	if *metricsPort < -1 || *metricsPort > 65535 {
		return badInput("--metrics-export-port %d: must be from 0 to 65535, or -1 for none", *metricsPort)
	}
	if *metricsPort >= 0 {
		cfg.MetricsAddress = net.JoinHostPort(*ip, strconv.Itoa(*metricsPort))
	}
	if cfg.AuthToken, err = daemonToken(*ip); err != nil {
		return err
	}
	if cfg.NodeID == "" {
		cfg.NodeID = raylet.NewNodeID() // simulated GPU UUIDs derive from it
	}
	lib, err := discoverGPUs(&cfg, rf, *gpuSimDir, log)
	if err != nil {
		return err
	}
	if cfg.MIGGPUs, err = parseMIGFlag(rf.mig, len(cfg.GPUs)); err != nil {
		return err
	}
	if len(cfg.MIGGPUs) > 0 {
		if cfg.MIG, err = gpu.NewMIGManager(lib); err != nil {
			return badInput("--mig %s: %v", rf.mig, err)
		}
		defer cfg.MIG.Close()
		cfg.MIGIdleTimeout = rf.migIdle
	}
	if len(cfg.GPUs) > 0 {
		cfg.GPUActivity, cfg.GPUActivityInterval = gpu.NewActivitySampler(lib), rf.gpuActivityInterval
	}
	cfg.SpotMetadataURL = rf.spotMetadataURL
	ctx, cancel := signalContext()
	defer cancel()
	gcheadroom.Keep(ctx, gcheadroom.DefaultHeadroom)
	startCtx, startCancel := context.WithTimeout(ctx, 15*time.Second)
	r, err := raylet.Start(startCtx, cfg)
	startCancel()
	if err != nil {
		return err
	}
	err = r.Wait(ctx)
	r.Stop()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// discoverGPUs sets the node's GPUs and NVLink domain in cfg: from the simulated machine
// of --gpu-sim (whose MIG state is kept in <simDir>/mig-<node id>.json, and whose activity
// is read from <simDir>/gpu-activity.json), else through the
// real NVML library and /sys. Without the driver it logs once and reports none. It
// returns the NVML library, for MIG.
func discoverGPUs(cfg *raylet.Config, rf nodeResourceFlags, simDir string, log zerolog.Logger) (nvml.Interface, error) {
	lib, sysfs := nvml.New(), "/sys"
	if rf.gpuSim != "" {
		var err error
		lib, sysfs, err = gpusim.Simulate(rf.gpuSim, gpusim.SimOptions{Seed: cfg.NodeID, Rack: rf.gpuRack, SysfsDir: simDir,
			MIGStateFile: filepath.Join(simDir, "mig-"+cfg.NodeID+".json"), ActivityFile: filepath.Join(simDir, gpusim.ActivityFileName)})
		if err != nil {
			return nil, badInput("--gpu-sim: %v", err)
		}
	}
	topology, err := gpu.DiscoverTopology(lib, sysfs)
	if err != nil {
		if errors.Is(err, gpu.ErrNVMLUnavailable) {
			log.Info().Err(err).Msg("no NVIDIA GPUs: NVML is not available on this machine")
			return lib, nil
		}
		return nil, fmt.Errorf("GPU discovery: %w", err)
	}
	gpus := make([]*pb.GPUInfo, len(topology.GPUs))
	for i, d := range topology.GPUs {
		gpus[i] = &pb.GPUInfo{Index: int32(d.Index), Uuid: d.UUID, Model: d.Model, MemoryBytes: d.MemoryBytes,
			PciBusId: d.PCIBusID, NvlinkIsland: int32(d.NVLinkIsland), Rail: int32(d.Rail), Nic: d.NIC}
	}
	log.Info().Int("gpus", len(gpus)).Interface("nvlink_islands", topology.Islands()).Str("nvlink_domain", topology.NVLinkDomain).
		Str("simulated", rf.gpuSim).Msg("GPUs discovered")
	cfg.GPUs, cfg.NVLinkDomain = gpus, topology.NVLinkDomain
	return lib, nil
}
