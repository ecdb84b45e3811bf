package raylet

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/raygo-dev/raygo/internal/ids"
	"github.com/raygo-dev/raygo/internal/membership"
	"github.com/raygo-dev/raygo/internal/resources"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/raylet/gpu"
)

// Config of a raylet. Use DefaultConfig and change what you need.
type Config struct {
	// NodeID is the node's id (56 hex characters); empty means a new random one. A
	// restarted raylet is a new node, as in Ray.
	NodeID string
	// NodeIP is what the raylet binds to and advertises (gRPC and memberlist).
	NodeIP string
	// Port is the gRPC port; 0 (the default) picks a free one.
	Port int
	// GossipPort is the memberlist port; 0 (the default) picks a free one.
	GossipPort int
	// GCSAddress is the GCS's host:port.
	GCSAddress string
	// NodeName defaults to NodeIP, as Ray's.
	NodeName string
	IsHead   bool
	// Resources overrides or adds resources (e.g. {"CPU": 4, "TPU": 1}); amounts are
	// rounded to 1/10000.
	Resources map[string]float64
	// Labels are user labels added to the defaults (ray.io/node-id, and
	// ray.io/accelerator-type on GPU nodes).
	Labels map[string]string
	// HeartbeatInterval is how often the raylet reports a change of its resources to the
	// GCS (and, while the GCS is unreachable or was lost, how often it tries). Default 1 s.
	HeartbeatInterval time.Duration
	// KeepAliveInterval is how often the raylet reports when nothing changed: a bare
	// keep-alive, so 10,000 idle raylets cost the GCS little. Liveness itself comes from
	// memberlist. Default 5 s; at least HeartbeatInterval.
	KeepAliveInterval time.Duration
	// ReconnectBackoffMax caps the wait between attempts to reach a GCS that is down.
	// Default 2 s, so a restarted GCS sees every live raylet within a few seconds.
	ReconnectBackoffMax time.Duration
	// Membership timers; the zero value takes membership.DefaultConfig.
	Membership membership.Config
	// MetricsAddress is where the raylet serves /metrics (HOST:PORT; port 0 picks a
	// free one); empty: not served.
	MetricsAddress string
	// AuthToken, when set, is the cluster token (internal/auth): every call to the
	// raylet must carry it, its calls carry it, its workers get it, and the gossip is
	// encrypted with a key derived from it. Empty: auth disabled.
	AuthToken string
	// GPUs are the node's whole GPUs as discovered (NVML or simulation), in index order.
	// Resources["GPU"], when set, offers that many: the first ones, or synthetic GPUs
	// without topology beyond the discovered ones.
	GPUs []*pb.GPUInfo
	// NVLinkDomain is the multi-node NVLink domain of the node's GPUs ("" if node-local).
	NVLinkDomain string
	// MIG carves and destroys MIG instances through NVML; nil means the node runs no GPU
	// in MIG mode. The raylet does not close it.
	MIG *gpu.MIGManager
	// MIGGPUs are the NVML indices of the GPUs to run in MIG mode (each one of GPUs);
	// they leave the whole-GPU list and the GPU resource and are offered as MIG slices.
	MIGGPUs []int
	// MIGIdleTimeout is how long a MIG instance no bundle holds stays carved for reuse
	// by the same profile before the raylet destroys it. Default 5 min.
	MIGIdleTimeout time.Duration
	// MIGRepartitionLimit caps the destroy and carve operations per MIG GPU per minute;
	// a prepare that needs more fails. Default 60.
	MIGRepartitionLimit int
	// GPUActivity reads the GPUs' activity and memory use for /metrics (DCGM's metrics
	// and raygo_raylet_gpus_allocated_idle, when MetricsAddress is set) and for the
	// heartbeat (the head's allocated-versus-used figures); nil: not read. The raylet
	// samples it in its own goroutine and closes it when it stops.
	GPUActivity *gpu.ActivitySampler
	// GPUActivityInterval is how often GPUActivity is sampled; 0 turns sampling off.
	// Default 5 s.
	GPUActivityInterval time.Duration
	// ExecutableCacheDir is where worker executables downloaded from the GCS are kept,
	// one file per SHA-256. Raylets on one machine may share it (files appear by atomic
	// rename). Default: <os.TempDir()>/raygo-executables-<uid>.
	ExecutableCacheDir string
	// ExecutableCacheTTL is how long a cached executable that no live worker of this
	// raylet runs stays after its last use (a lease asking for it, on any raylet sharing
	// ExecutableCacheDir) before the raylet removes it; a later lease downloads it
	// again. 0 keeps every executable forever. Default 1 h.
	ExecutableCacheTTL time.Duration
	// WorkerLogDir, when set, receives each worker's stdout and stderr as
	// worker-<id>.out and worker-<id>.err; empty (the default) means workers write to the
	// raylet's own stdout and stderr.
	WorkerLogDir string
	// WorkerStartTimeout is how long a new worker has to call RegisterWorker before the
	// raylet kills it and fails the lease. Default 60 s.
	WorkerStartTimeout time.Duration
	// IdleWorkerTimeout is how long a returned worker waits in the idle pool for another
	// lease before the raylet kills it. Default 60 s.
	IdleWorkerTimeout time.Duration
	// SpotMetadataURL is the instance-metadata endpoint the raylet watches for a spot
	// interruption notice (EC2: http://169.254.169.254); "" watches nothing. On a notice
	// the node drains itself with reason PREEMPTION and the notice's deadline.
	SpotMetadataURL string
	// SpotPollInterval is how often the notice is looked for (default 5 s, as AWS
	// advises).
	SpotPollInterval time.Duration
	// TenantTokenTTL is how long the raylet keeps the GCS's answer about a tenant's token
	// (its scope, and whether it owns a lease's job and group): a revoked tenant token
	// is refused by raylets within it. Default 5 s; 0 asks the GCS on every call.
	TenantTokenTTL time.Duration
	Logger         zerolog.Logger
}

// DefaultConfig returns a raylet on 127.0.0.1 with free ports, joining the GCS at
// 127.0.0.1:6380.
func DefaultConfig() Config {
	return Config{
		NodeIP:              "127.0.0.1",
		GCSAddress:          "127.0.0.1:6380",
		HeartbeatInterval:   time.Second,
		KeepAliveInterval:   5 * time.Second,
		ReconnectBackoffMax: 2 * time.Second,
		Membership:          membership.DefaultConfig(),
		MIGIdleTimeout:      5 * time.Minute,
		MIGRepartitionLimit: 60,
		GPUActivityInterval: 5 * time.Second,
		ExecutableCacheDir:  filepath.Join(os.TempDir(), "raygo-executables-"+strconv.Itoa(os.Getuid())),
		ExecutableCacheTTL:  time.Hour,
		WorkerStartTimeout:  60 * time.Second,
		IdleWorkerTimeout:   60 * time.Second,
		TenantTokenTTL:      5 * time.Second,
		Logger:              zerolog.Nop(),
	}
}

// Validate reports the first bad field.
func (c Config) Validate() error {
	if net.ParseIP(c.NodeIP) == nil {
		return fmt.Errorf("raylet config: NodeIP %q is not an IP address", c.NodeIP)
	}
	if c.NodeID != "" {
		if b, err := hex.DecodeString(c.NodeID); err != nil || len(b) != nodeIDBytes {
			return fmt.Errorf("raylet config: NodeID %q must be %d hex characters", c.NodeID, 2*nodeIDBytes)
		}
	}
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("raylet config: Port %d out of range 0-65535", c.Port)
	}
	if c.GossipPort < 0 || c.GossipPort > 65535 {
		return fmt.Errorf("raylet config: GossipPort %d out of range 0-65535", c.GossipPort)
	}
	if _, _, err := net.SplitHostPort(c.GCSAddress); err != nil {
		return fmt.Errorf("raylet config: GCSAddress %q: %w", c.GCSAddress, err)
	}
	if _, err := resources.ParseNodeResources(c.Resources); err != nil {
		return fmt.Errorf("raylet config: Resources%w", err)
	}
	if _, set := c.Resources[resources.HeadNode]; set {
		// As Ray: the raylet sets it on the head node only.
		return fmt.Errorf("raylet config: Resources[%q]: a reserved resource name, set by the raylet on the head node", resources.HeadNode)
	}
	if c.HeartbeatInterval <= 0 {
		return errors.New("raylet config: HeartbeatInterval must be positive")
	}
	if c.KeepAliveInterval < c.HeartbeatInterval {
		return fmt.Errorf("raylet config: KeepAliveInterval %s must be at least HeartbeatInterval %s", c.KeepAliveInterval, c.HeartbeatInterval)
	}
	if c.ReconnectBackoffMax <= 0 {
		return errors.New("raylet config: ReconnectBackoffMax must be positive")
	}
	if c.GPUActivityInterval < 0 {
		return fmt.Errorf("raylet config: GPUActivityInterval %s must not be negative (0 turns sampling off)", c.GPUActivityInterval)
	}
	if c.TenantTokenTTL < 0 {
		return fmt.Errorf("raylet config: TenantTokenTTL %s must not be negative (0 asks the GCS on every call)", c.TenantTokenTTL)
	}
	if err := c.validateWorkers(); err != nil {
		return err
	}
	return c.validateMIG()
}

// validateWorkers checks the worker-pool fields.
func (c Config) validateWorkers() error {
	if c.ExecutableCacheDir == "" {
		return errors.New("raylet config: ExecutableCacheDir must be set")
	}
	if c.ExecutableCacheTTL < 0 {
		return fmt.Errorf("raylet config: ExecutableCacheTTL %s must not be negative (0 keeps executables forever)", c.ExecutableCacheTTL)
	}
	if c.WorkerStartTimeout <= 0 {
		return errors.New("raylet config: WorkerStartTimeout must be positive")
	}
	if c.IdleWorkerTimeout <= 0 {
		return errors.New("raylet config: IdleWorkerTimeout must be positive")
	}
	return nil
}

// validateMIG checks the MIG fields; they matter only when MIGGPUs names a GPU.
func (c Config) validateMIG() error {
	if len(c.MIGGPUs) == 0 {
		return nil
	}
	if c.MIG == nil {
		return fmt.Errorf("raylet config: MIGGPUs %v given without a MIG manager", c.MIGGPUs)
	}
	if c.MIGIdleTimeout <= 0 {
		return errors.New("raylet config: MIGIdleTimeout must be positive")
	}
	if c.MIGRepartitionLimit <= 0 {
		return errors.New("raylet config: MIGRepartitionLimit must be positive")
	}
	seen := map[int]bool{}
	for i, index := range c.MIGGPUs {
		if seen[index] {
			return fmt.Errorf("raylet config: MIGGPUs[%d] = %d: listed twice", i, index)
		}
		seen[index] = true
		if !slices.ContainsFunc(c.GPUs, func(g *pb.GPUInfo) bool { return int(g.GetIndex()) == index }) {
			return fmt.Errorf("raylet config: MIGGPUs[%d] = %d: not one of the node's GPUs", i, index)
		}
	}
	return nil
}

// nodeIDBytes is the size of a node id, as Ray's NodeID.
const nodeIDBytes = 28

// NewNodeID returns a random node id.
func NewNodeID() string { return ids.Random(nodeIDBytes) }
