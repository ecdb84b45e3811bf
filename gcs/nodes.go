package gcs

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/auth"
	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/membership"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/rs/zerolog"
)

// Death reasons recorded in NodeInfo.death_reason.
const (
	deathMemberlistFailed = "memberlist: the node stopped answering probes, and its raylet did not answer the GCS"
	deathNotReconnected   = "did not reconnect after the GCS restarted"
	deathRayletGone       = "did not reconnect after the GCS restarted, and nothing listens at its raylet's address"
	deathUnregistered     = "raylet shut down"
	awaitingReconnectNote = "reloaded after a GCS restart; waiting for the raylet to reconnect"
)

// nodeManager owns the node table. Concurrency: every field behind mu.
type nodeManager struct {
	pb.UnimplementedNodeInfoServiceServer
	nodeDeps
	// listeners hear of nodes that connect, die or report resources (set before serving).
	listeners []nodeListener

	mu    sync.Mutex
	nodes map[string]*pb.NodeInfo
	// awaitingReconnect holds the nodes reloaded as ALIVE from the store that have not
	// yet reported to this incarnation.
	awaitingReconnect map[string]bool
	rayletConns       map[string]*grpc.ClientConn
	graceTimer        *time.Timer
	// resourceVersions is the version of each node's resources_available, so an older
	// report (a heartbeat sent before a prepare's reply) never overwrites a newer one.
	resourceVersions map[string]int64
	// failed holds the raylets memberlist declared failed (or gone) and has not seen again;
	// each has a confirmFailure loop calling its raylet.
	failed map[string]bool
	// secrets holds, per node id, the SHA-256 of the secret issued at its first
	// registration (TableNodeSecrets): re-registration, heartbeats and unregistration
	// must carry the secret.
	secrets map[string][sha256.Size]byte
	// lastReport is when each node last registered or reported to this GCS; one silent
	// for nodeTimeout is DEAD (nodes reloaded after a restart have the reconnect grace).
	lastReport map[string]time.Time
	// idleGPUs is, per node, its raylet's last count of allocated GPUs idle for 10
	// minutes, by placement group (ReportHeartbeatRequest.idle_gpus).
	idleGPUs map[string]map[string]int32
	// gpuActivity is, per ALIVE node, its raylet's last GPU activity sample
	// (ReportHeartbeatRequest.gpu_activity), filled into GetAllNodeInfo's rows; not stored.
	gpuActivity map[string][]*pb.GPUActivity
	// lastWork is, per node, the last moment the GCS saw work on it (a bundle, a lease,
	// an actor), or its registration: an idle node has been idle since then. Only work
	// moves it, never a heartbeat that changes nothing (autoscaler_state.go).
	lastWork map[string]time.Time
	// reportBusy: the node's last applied resource report had less available than its
	// total (a bundle or a worker lease holds some).
	reportBusy map[string]bool
	// done is closed by close: confirmFailure loops end.
	done chan struct{}
}

// Confirming a failure memberlist reports: the GCS calls the raylet itself, with this
// timeout, and calls it again at this interval while memberlist still says failed.
const (
	failureProbeTimeout = time.Second
	failureProbeEvery   = time.Second
)

// nodeDeps is what the node manager is given.
type nodeDeps struct {
	store store.Store
	log   zerolog.Logger
	now   func() time.Time
	// epoch is this GCS incarnation's; startTime when it started.
	epoch     int64
	startTime time.Time
	// reconnectGrace is Config.ReconnectGrace.
	reconnectGrace time.Duration
	// gossipAddress is the GCS's memberlist address (known once gossip started).
	gossipAddress func() string
	// dashboardAddress is where /metrics is served ("" when not); nil: not served.
	dashboardAddress func() string
	// authToken is Config.AuthToken, whose hash (and the gossip key derived from it)
	// registering raylets get.
	authToken string
	// gcsCredential is the GCS's own credential (gcsCredential in server.go), which calls
	// to raylets carry and whose hash registering raylets get; "" with auth off.
	gcsCredential string
	// nodeTimeout is Config.NodeTimeout.
	nodeTimeout time.Duration
}

func newNodeManager(deps nodeDeps) *nodeManager {
	return &nodeManager{
		nodeDeps:          deps,
		nodes:             map[string]*pb.NodeInfo{},
		awaitingReconnect: map[string]bool{},
		rayletConns:       map[string]*grpc.ClientConn{},
		resourceVersions:  map[string]int64{},
		failed:            map[string]bool{},
		secrets:           map[string][sha256.Size]byte{},
		lastReport:        map[string]time.Time{},
		idleGPUs:          map[string]map[string]int32{},
		gpuActivity:       map[string][]*pb.GPUActivity{},
		lastWork:          map[string]time.Time{},
		reportBusy:        map[string]bool{},
		done:              make(chan struct{}),
	}
}

// load reads the node table and returns how many ALIVE nodes must reconnect.
// subscribe adds a listener of node events; call it before the server serves.
func (m *nodeManager) subscribe(l nodeListener) { m.listeners = append(m.listeners, l) }

func (m *nodeManager) load(ctx context.Context) (int, error) {
	rows, err := m.store.GetAll(ctx, store.TableNodes)
	if err != nil {
		return 0, fmt.Errorf("load node table: %w", err)
	}
	secrets, err := m.store.GetAll(ctx, store.TableNodeSecrets)
	if err != nil {
		return 0, fmt.Errorf("load node secrets: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, hash := range secrets {
		if len(hash) != sha256.Size {
			return 0, fmt.Errorf("load node secrets: node %s: %d bytes, want %d", id, len(hash), sha256.Size)
		}
		m.secrets[id] = [sha256.Size]byte(hash)
	}
	for id, raw := range rows {
		node := &pb.NodeInfo{}
		if err := proto.Unmarshal(raw, node); err != nil {
			return 0, fmt.Errorf("load node table: node %s: %w", id, err)
		}
		m.nodes[id] = node
		if node.State == pb.NodeState_ALIVE {
			m.awaitingReconnect[id] = true
			node.StateMessage = awaitingReconnectNote
		}
	}
	return len(m.awaitingReconnect), nil
}

// startReconnectGrace marks DEAD, after the grace period, the reloaded nodes that have not
// reported to this incarnation.
func (m *nodeManager) startReconnectGrace(reloaded int) {
	if reloaded == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for id := range m.awaitingReconnect {
		go m.watchReloaded(id, m.nodes[id].RayletAddress)
	}
	m.graceTimer = time.AfterFunc(m.reconnectGrace, func() {
		m.mu.Lock()
		ids := make([]string, 0, len(m.awaitingReconnect))
		for id := range m.awaitingReconnect {
			ids = append(ids, id)
		}
		m.mu.Unlock()
		for _, id := range ids {
			m.markDead(id, deathNotReconnected)
		}
	})
}

// watchReloaded marks a reloaded node DEAD before the grace ends when, a tenth of the
// grace after this start, nothing listens at its raylet's address any more (the
// connection is refused: the raylet is gone, not cut off), and keeps checking every
// failureProbeEvery until the node reconnects, is DEAD or the manager closes. Without
// it a GCS restarted again within the grace, over and over, would start the grace again
// each time and keep a dead node ALIVE, a placement target every call to which fails.
// A raylet that does not answer for another reason (a partition, a stop) has the grace.
func (m *nodeManager) watchReloaded(id, address string) {
	if address == "" {
		return
	}
	wait := m.reconnectGrace / 10
	for {
		select {
		case <-m.done:
			return
		case <-time.After(wait):
		}
		wait = failureProbeEvery
		m.mu.Lock()
		awaiting := m.awaitingReconnect[id]
		m.mu.Unlock()
		if !awaiting {
			return
		}
		conn, err := net.DialTimeout("tcp", address, failureProbeTimeout)
		if err == nil {
			conn.Close()
			continue
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			m.log.Warn().Str("node_id", id).Str("address", address).Msg("a node reloaded after the GCS restarted has no raylet listening at its address")
			m.markDead(id, deathRayletGone)
			return
		}
	}
}

func (m *nodeManager) gossipSeeds() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var seeds []string
	for _, n := range m.nodes {
		if n.State == pb.NodeState_ALIVE && n.GossipAddress != "" {
			seeds = append(seeds, n.GossipAddress)
		}
	}
	sort.Strings(seeds)
	return seeds
}

func (m *nodeManager) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.done:
	default:
		close(m.done)
	}
	if m.graceTimer != nil {
		m.graceTimer.Stop()
	}
	for id, conn := range m.rayletConns {
		_ = conn.Close()
		delete(m.rayletConns, id)
	}
}

// persist writes one node row. Callers hold no lock: the row is a clone.
func (m *nodeManager) persist(ctx context.Context, node *pb.NodeInfo) error {
	raw, err := proto.Marshal(node)
	if err != nil {
		return fmt.Errorf("encode node %s: %w", node.NodeId, err)
	}
	if err := m.store.Put(ctx, store.TableNodes, node.NodeId, raw); err != nil {
		return errorf(errUnavailable, "persist node %s: %v", node.NodeId, err)
	}
	return nil
}

// markDead records a node's death (once) and persists it.
func (m *nodeManager) markDead(nodeID, reason string) {
	m.mu.Lock()
	node, ok := m.nodes[nodeID]
	if !ok || node.State == pb.NodeState_DEAD {
		m.mu.Unlock()
		return
	}
	node.State = pb.NodeState_DEAD
	node.DeathReason = reason
	node.EndTimeMs = m.now().UnixMilli()
	node.ResourcesAvailable = map[string]float64{}
	node.StateMessage = ""
	delete(m.awaitingReconnect, nodeID)
	delete(m.lastReport, nodeID)
	delete(m.lastWork, nodeID)
	delete(m.reportBusy, nodeID)
	delete(m.gpuActivity, nodeID)
	if conn := m.rayletConns[nodeID]; conn != nil {
		_ = conn.Close()
		delete(m.rayletConns, nodeID)
	}
	row := proto.Clone(node).(*pb.NodeInfo)
	m.mu.Unlock()
	m.log.Warn().Str("node_id", nodeID).Str("reason", reason).Msg("node marked DEAD")
	for _, l := range m.listeners {
		l.onNodeDead(nodeID)
	}
	if err := m.persist(context.Background(), row); err != nil {
		m.log.Error().Err(err).Str("node_id", nodeID).Msg("could not persist node death")
	}
}

// MemberJoined implements membership.Events. A raylet seen again ends the check of a
// failure reported before.
func (m *nodeManager) MemberJoined(name string, meta membership.Meta) {
	m.log.Debug().Str("member", name).Str("kind", meta.Kind).Msg("memberlist join")
	if meta.Kind == "raylet" && meta.NodeID != "" {
		m.mu.Lock()
		delete(m.failed, meta.NodeID)
		m.mu.Unlock()
	}
}

// MemberFailed implements membership.Events. Memberlist's word alone does not kill a
// node: a member cut off for a while gossips the others as dead when its link returns,
// and every other member believes it. The GCS calls the raylet itself and marks the
// node DEAD only when that call fails too; while the raylet answers, the node stays
// ALIVE and the GCS calls again every second until memberlist sees it again.
func (m *nodeManager) MemberFailed(name string, meta membership.Meta) {
	if meta.Kind != "raylet" || meta.NodeID == "" {
		return
	}
	m.mu.Lock()
	checking := m.failed[meta.NodeID]
	m.failed[meta.NodeID] = true
	m.mu.Unlock()
	if !checking {
		// memberlist calls us from its own goroutine, which must not block.
		go m.confirmFailure(meta.NodeID)
	}
}

// confirmFailure is MemberFailed's check of one node, until memberlist sees it again,
// its raylet stops answering (DEAD) or the manager closes.
func (m *nodeManager) confirmFailure(nodeID string) {
	for answered := 0; ; answered++ {
		m.mu.Lock()
		node, known := m.nodes[nodeID]
		if known {
			node = proto.Clone(node).(*pb.NodeInfo)
		}
		checking := m.failed[nodeID]
		if !checking || !known || node.State != pb.NodeState_ALIVE {
			delete(m.failed, nodeID)
			m.mu.Unlock()
			return
		}
		m.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), failureProbeTimeout)
		err := m.probeRaylet(ctx, node)
		cancel()
		if err != nil {
			m.mu.Lock()
			delete(m.failed, nodeID)
			m.mu.Unlock()
			m.log.Warn().Str("node_id", nodeID).Err(err).Msg("memberlist declared the node failed and its raylet does not answer")
			m.markDead(nodeID, deathMemberlistFailed)
			return
		}
		if answered == 0 {
			m.log.Warn().Str("node_id", nodeID).Msg("memberlist declared the node failed but its raylet answers: it stays ALIVE")
		}
		select {
		case <-m.done:
			return
		case <-time.After(failureProbeEvery):
		}
	}
}

// probeRaylet asks the raylet at the node's address for its stats over a
// connection of its own: the shared one may still be waiting out a reconnect backoff
// from before a partition healed.
func (m *nodeManager) probeRaylet(ctx context.Context, node *pb.NodeInfo) error {
	conn, err := m.dialRaylet(node.RayletAddress)
	if err != nil {
		return err
	}
	defer conn.Close()
	reply, err := pb.NewNodeManagerServiceClient(conn).GetNodeStats(ctx, &pb.GetNodeStatsRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	if got := reply.GetNode().GetNodeId(); got != node.NodeId {
		return fmt.Errorf("raylet at %s answers as node %q", node.RayletAddress, got)
	}
	return nil
}

// GetClusterInfo implements pb.NodeInfoServiceServer.
func (m *nodeManager) GetClusterInfo(ctx context.Context, _ *pb.GetClusterInfoRequest) (*pb.GetClusterInfoReply, error) {
	dashboard := ""
	if m.dashboardAddress != nil {
		dashboard = m.dashboardAddress()
	}
	return &pb.GetClusterInfoReply{
		GcsEpoch:         m.epoch,
		GossipAddress:    m.gossipAddress(),
		ProtocolVersion:  rpcutil.ProtocolVersion,
		Store:            m.store.Name(),
		StartTimeMs:      m.startTime.UnixMilli(),
		DashboardAddress: dashboard,
	}, nil
}

// RegisterNode implements pb.NodeInfoServiceServer.
func (m *nodeManager) RegisterNode(ctx context.Context, req *pb.RegisterNodeRequest) (*pb.RegisterNodeReply, error) {
	in := req.GetNode()
	if in == nil || in.NodeId == "" {
		return nil, errorf(fielderr.ErrInvalid, "%s", "node.node_id: required")
	}
	if in.RayletAddress == "" {
		return nil, errorf(fielderr.ErrInvalid, "%s", "node.raylet_address: required")
	}
	// A node's offer is checked like a bundle's: one NaN, negative or overflowing amount
	// would stop every placement.
	if _, err := resources.ParseNodeResources(in.ResourcesTotal); err != nil {
		return nil, fielderr.WithPrefix(err, "node.resources_total")
	}
	if _, err := resources.SetFromFloat(in.ResourcesAvailable); err != nil {
		return nil, fielderr.WithPrefix(err, "node.resources_available")
	}
	if err := nodelabel.CheckLabels(in.Labels); err != nil {
		return nil, fielderr.WithPrefix(err, "node.labels")
	}
	m.mu.Lock()
	if old, ok := m.nodes[in.NodeId]; ok && old.State == pb.NodeState_DEAD {
		m.mu.Unlock()
		return nil, errorf(errFailedPrecondition, "node %s is DEAD (%s); a restarted raylet registers with a new node id", in.NodeId, old.DeathReason)
	}
	// A node id this GCS knows is registered again only by the holder of its secret; a
	// new one gets its secret now.
	var secret string
	var secretHash [sha256.Size]byte
	if _, known := m.secrets[in.NodeId]; known {
		if err := m.checkSecretLocked(in.NodeId, req.NodeSecret, "register"); err != nil {
			m.mu.Unlock()
			return nil, err
		}
	} else {
		var err error
		if secret, err = auth.Generate(); err != nil {
			m.mu.Unlock()
			return nil, errorf(errInternal, "node %s: issue a secret: %v", in.NodeId, err)
		}
		secretHash = sha256.Sum256([]byte(secret))
		m.secrets[in.NodeId] = secretHash
	}
	m.lastReport[in.NodeId] = m.now()
	node := proto.Clone(in).(*pb.NodeInfo)
	node.State = pb.NodeState_ALIVE
	if old, ok := m.nodes[in.NodeId]; ok {
		// Re-registration after a GCS restart: keep what the GCS decided about the node.
		node.IsDraining, node.DrainReason, node.StartTimeMs = old.IsDraining, old.DrainReason, old.StartTimeMs
	}
	if node.StartTimeMs == 0 {
		node.StartTimeMs = m.now().UnixMilli()
	}
	m.nodes[node.NodeId] = node
	delete(m.awaitingReconnect, node.NodeId)
	if _, seen := m.lastWork[node.NodeId]; !seen {
		// The idle clock of a node new to this GCS starts at its registration.
		m.lastWork[node.NodeId] = m.now()
	}
	m.noteReportLocked(node)
	row := proto.Clone(node).(*pb.NodeInfo)
	m.mu.Unlock()

	if secret != "" {
		if err := m.store.Put(ctx, store.TableNodeSecrets, node.NodeId, secretHash[:]); err != nil {
			m.mu.Lock()
			if m.secrets[node.NodeId] == secretHash {
				delete(m.secrets, node.NodeId)
			}
			m.mu.Unlock()
			return nil, errorf(errUnavailable, "persist the secret of node %s: %v", node.NodeId, err)
		}
	}
	if err := m.persist(ctx, row); err != nil {
		return nil, err
	}
	m.log.Info().Str("node_id", node.NodeId).Str("raylet_address", node.RayletAddress).
		Str("node_name", node.NodeName).Bool("is_head_node", node.IsHeadNode).Msg("node registered")
	for _, l := range m.listeners {
		go l.onNodeConnected(row)
	}
	for _, l := range m.listeners {
		l.onNodeRegistered(row)
	}
	seeds := append([]string{m.gossipAddress()}, m.gossipSeeds()...)
	reply := &pb.RegisterNodeReply{GcsEpoch: m.epoch, GossipSeeds: seeds, NodeSecret: secret}
	if m.authToken != "" {
		// For a raylet holding a node token (admin and node tokens alone reach here).
		reply.GossipKey, reply.ClusterTokenSha256 = auth.GossipKey(m.authToken), auth.HashToken(m.authToken)
		reply.GcsCredentialSha256 = auth.HashToken(m.gcsCredential)
	}
	return reply, nil
}

// checkSecretLocked refuses a request about a node that does not carry the node's
// secret. Callers hold mu.
func (m *nodeManager) checkSecretLocked(nodeID, presented, what string) error {
	want, ok := m.secrets[nodeID]
	if !ok {
		return nil // a node registered before secrets existed, or never: checked elsewhere
	}
	got := sha256.Sum256([]byte(presented))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		return errorf(errPermissionDenied, "node_secret: node %s is registered; only its own raylet, with the secret it got at its first registration, may %s it", nodeID, what)
	}
	return nil
}

// watchReports marks DEAD, every quarter of nodeTimeout, the nodes that registered or
// reported to this GCS and then fell silent for nodeTimeout: a node that registers but
// never gossips or heartbeats does not hold bundles for long.
func (m *nodeManager) watchReports() {
	if m.nodeTimeout <= 0 {
		return
	}
	ticker := time.NewTicker(m.nodeTimeout / 4)
	defer ticker.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-ticker.C:
		}
		now := m.now()
		var silent []string
		m.mu.Lock()
		for id, last := range m.lastReport {
			if node := m.nodes[id]; node != nil && node.State == pb.NodeState_ALIVE && now.Sub(last) >= m.nodeTimeout {
				silent = append(silent, id)
			}
		}
		m.mu.Unlock()
		for _, id := range silent {
			m.markDead(id, fmt.Sprintf("no heartbeat for %s", m.nodeTimeout))
		}
	}
}

// ReportHeartbeat implements pb.NodeInfoServiceServer.
func (m *nodeManager) ReportHeartbeat(ctx context.Context, req *pb.ReportHeartbeatRequest) (*pb.ReportHeartbeatReply, error) {
	if _, err := resources.SetFromFloat(req.ResourcesAvailable); err != nil {
		return nil, fielderr.WithPrefix(err, "resources_available")
	}
	m.mu.Lock()
	node, ok := m.nodes[req.NodeId]
	if !ok {
		m.mu.Unlock()
		return nil, errorf(errNotFound, "node %s is not registered with this GCS", req.NodeId)
	}
	if node.State == pb.NodeState_DEAD {
		m.mu.Unlock()
		return nil, errorf(errFailedPrecondition, "node %s is DEAD (%s)", req.NodeId, node.DeathReason)
	}
	if err := m.checkSecretLocked(req.NodeId, req.NodeSecret, "report for"); err != nil {
		m.mu.Unlock()
		return nil, err
	}
	m.lastReport[req.NodeId] = m.now()
	if len(req.IdleGpus) > 0 {
		m.idleGPUs[req.NodeId] = req.IdleGpus
	} else {
		delete(m.idleGPUs, req.NodeId)
	}
	if len(req.GpuActivity) > 0 {
		m.gpuActivity[req.NodeId] = req.GpuActivity
	} else {
		delete(m.gpuActivity, req.NodeId)
	}
	// A keep-alive changes nothing, unless this GCS does not have the version it names
	// (a restarted GCS, a lost report): the raylet is asked for a full report.
	newer, hasMIG, sendFull := false, false, false
	if req.Unchanged {
		sendFull = m.resourceVersions[req.NodeId] != req.ResourcesVersion
	} else {
		newer = m.applyResourcesLocked(node, &pb.ResourceReport{ResourcesAvailable: req.ResourcesAvailable, Version: req.ResourcesVersion, MigGpus: req.MigGpus})
		hasMIG = len(node.MigGpus) > 0
	}
	node.StateMessage = ""
	var reconnected *pb.NodeInfo
	if m.awaitingReconnect[req.NodeId] {
		reconnected = proto.Clone(node).(*pb.NodeInfo)
	}
	delete(m.awaitingReconnect, req.NodeId)
	m.mu.Unlock()
	if newer {
		m.resourcesReported(hasMIG)
	}
	if reconnected != nil {
		m.log.Info().Str("node_id", req.NodeId).Msg("node reconnected after GCS restart")
		for _, l := range m.listeners {
			go l.onNodeConnected(reconnected)
		}
	}
	return &pb.ReportHeartbeatReply{GcsEpoch: m.epoch, GcsGossipAddress: m.gossipAddress(), SendFullReport: sendFull}, nil
}

// GetAllNodeInfo implements pb.NodeInfoServiceServer. Nodes are sorted: head first, then
// by start time, then id.
func (m *nodeManager) GetAllNodeInfo(ctx context.Context, req *pb.GetAllNodeInfoRequest) (*pb.GetAllNodeInfoReply, error) {
	m.mu.Lock()
	out := make([]*pb.NodeInfo, 0, len(m.nodes))
	for _, n := range m.nodes {
		if req.AliveOnly && n.State != pb.NodeState_ALIVE {
			continue
		}
		row := proto.Clone(n).(*pb.NodeInfo)
		if n.State == pb.NodeState_ALIVE {
			for _, a := range m.gpuActivity[n.NodeId] {
				row.GpuActivity = append(row.GpuActivity, proto.Clone(a).(*pb.GPUActivity))
			}
		}
		out = append(out, row)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.IsHeadNode != b.IsHeadNode {
			return a.IsHeadNode
		}
		if a.StartTimeMs != b.StartTimeMs {
			return a.StartTimeMs < b.StartTimeMs
		}
		return a.NodeId < b.NodeId
	})
	return &pb.GetAllNodeInfoReply{Nodes: out}, nil
}

// DrainNode implements pb.NodeInfoServiceServer.
func (m *nodeManager) DrainNode(ctx context.Context, req *pb.DrainNodeRequest) (*pb.DrainNodeReply, error) {
	row, _, err := m.drain(ctx, req.NodeId, req.Reason, nil)
	if err != nil {
		return nil, err
	}
	return &pb.DrainNodeReply{Node: row}, nil
}

// drain marks an ALIVE node draining, so placement and the actor scheduler send it
// nothing new, persists it and tells its raylet, which then refuses new bundles and
// leases itself. When idle is given (an idle termination), it is asked once the GCS has
// marked the node and before the raylet is told: a non-empty answer (the work found on
// the node) takes the mark back (unless the node was draining already) and is returned
// as the rejection. Marking first means no bundle the GCS decides after the check goes
// to the node; a lease the raylet grants on its own before it hears of the drain is
// still possible, and is seen by the next idle check.
func (m *nodeManager) drain(ctx context.Context, nodeID, reason string, idle func() string) (row *pb.NodeInfo, rejected string, err error) {
	if nodeID == "" {
		return nil, "", errorf(fielderr.ErrInvalid, "%s", "node_id: required")
	}
	m.mu.Lock()
	node, ok := m.nodes[nodeID]
	if !ok {
		m.mu.Unlock()
		return nil, "", errorf(errNotFound, "node_id %s: no such node", nodeID)
	}
	if node.State == pb.NodeState_DEAD {
		m.mu.Unlock()
		return nil, "", errorf(errFailedPrecondition, "node_id %s: node is DEAD", nodeID)
	}
	wasDraining, oldReason := node.IsDraining, node.DrainReason
	node.IsDraining = true
	node.DrainReason = reason
	row = proto.Clone(node).(*pb.NodeInfo)
	conn, err := m.rayletConnLocked(node)
	m.mu.Unlock()
	if err != nil {
		return nil, "", errorf(errInternal, "node_id %s: %v", nodeID, err)
	}
	m.nodeChanged(row)
	if idle != nil {
		if busy := idle(); busy != "" {
			m.mu.Lock()
			if node.State != pb.NodeState_DEAD && !wasDraining {
				node.IsDraining, node.DrainReason = false, oldReason
			}
			row = proto.Clone(node).(*pb.NodeInfo)
			m.mu.Unlock()
			m.nodeChanged(row)
			return row, busy, nil
		}
	}
	if err := m.persist(ctx, row); err != nil {
		return nil, "", err
	}
	// The raylet refuses new work itself too; if it cannot be told now, the GCS view
	// still keeps work away from it.
	callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := pb.NewNodeManagerServiceClient(conn).DrainRaylet(callCtx, &pb.DrainRayletRequest{Reason: reason}); err != nil {
		m.log.Warn().Err(err).Str("node_id", nodeID).Msg("raylet did not acknowledge draining")
	}
	m.log.Info().Str("node_id", nodeID).Str("reason", reason).Msg("node draining")
	return row, "", nil
}

// nodeChanged tells the listeners that a node's row changed (here: its draining flag),
// so the schedulers see it before their next decision. Callers hold no lock.
func (m *nodeManager) nodeChanged(row *pb.NodeInfo) {
	for _, l := range m.listeners {
		l.onNodeRegistered(row)
	}
}

// UnregisterNode implements pb.NodeInfoServiceServer.
func (m *nodeManager) UnregisterNode(ctx context.Context, req *pb.UnregisterNodeRequest) (*pb.UnregisterNodeReply, error) {
	reason := deathUnregistered
	if req.Reason != "" {
		reason = req.Reason
	}
	m.mu.Lock()
	err := m.checkSecretLocked(req.NodeId, req.NodeSecret, "unregister")
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	m.markDead(req.NodeId, reason)
	return &pb.UnregisterNodeReply{}, nil
}

// dialRaylet opens a connection to a raylet whose calls carry this GCS's epoch and its
// own credential, which raylets take for the 2PC and epoch-bearing calls (and the cluster
// token's calls besides).
func (m *nodeManager) dialRaylet(address string) (*grpc.ClientConn, error) {
	epoch := m.epoch
	return rpcutil.Dial(address, rpcutil.DialOptions{Epoch: func() int64 { return epoch }, Token: m.gcsCredential})
}

// rayletConnLocked returns the connection to a node's raylet; every request on it carries
// this GCS's epoch. Callers hold mu.
func (m *nodeManager) rayletConnLocked(node *pb.NodeInfo) (*grpc.ClientConn, error) {
	if conn := m.rayletConns[node.NodeId]; conn != nil {
		return conn, nil
	}
	conn, err := m.dialRaylet(node.RayletAddress)
	if err != nil {
		return nil, err
	}
	m.rayletConns[node.NodeId] = conn
	return conn, nil
}

// aliveNodes returns copies of the ALIVE nodes.
func (m *nodeManager) aliveNodes() []*pb.NodeInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*pb.NodeInfo, 0, len(m.nodes))
	for _, n := range m.nodes {
		if n.State == pb.NodeState_ALIVE {
			out = append(out, proto.Clone(n).(*pb.NodeInfo))
		}
	}
	return out
}

// schedulingNodes returns the ALIVE nodes for a scheduler to read: each a new message
// whose maps and slices are the node table's own. The table never changes those in place
// (a registration or report replaces them), so the views stay valid; callers must not
// modify them. Far cheaper than aliveNodes' deep copies at thousands of nodes.
func (m *nodeManager) schedulingNodes() []*pb.NodeInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*pb.NodeInfo, 0, len(m.nodes))
	for _, n := range m.nodes {
		if n.State == pb.NodeState_ALIVE {
			out = append(out, &pb.NodeInfo{NodeId: n.NodeId, NodeName: n.NodeName, RayletAddress: n.RayletAddress,
				IsHeadNode: n.IsHeadNode, State: n.State, ResourcesTotal: n.ResourcesTotal, ResourcesAvailable: n.ResourcesAvailable,
				Labels: n.Labels, IsDraining: n.IsDraining, Gpus: n.Gpus, NvlinkDomain: n.NvlinkDomain, MigGpus: n.MigGpus})
		}
	}
	return out
}

// rayletClient returns a client of a node's raylet whose calls carry this GCS's epoch.
func (m *nodeManager) rayletClient(nodeID string) (pb.NodeManagerServiceClient, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	node, ok := m.nodes[nodeID]
	if !ok || node.State != pb.NodeState_ALIVE {
		return nil, fmt.Errorf("node %s is not ALIVE", nodeID)
	}
	conn, err := m.rayletConnLocked(node)
	if err != nil {
		return nil, err
	}
	return pb.NewNodeManagerServiceClient(conn), nil
}

// rayletAddress is a node's raylet address ("" for an unknown node).
func (m *nodeManager) rayletAddress(nodeID string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if node, ok := m.nodes[nodeID]; ok {
		return node.RayletAddress
	}
	return ""
}

// applyResourcesLocked records a raylet's available resources and MIG slot maps unless a
// newer report arrived first. Version 0 is a raylet that has changed nothing yet. It
// reports whether the report was newer than the last: the caller then tells the listeners
// (resourcesReported) once it has released mu.
func (m *nodeManager) applyResourcesLocked(node *pb.NodeInfo, report *pb.ResourceReport) bool {
	if report.Version < m.resourceVersions[node.NodeId] {
		return false
	}
	newer := report.Version > m.resourceVersions[node.NodeId]
	m.resourceVersions[node.NodeId] = report.Version
	node.ResourcesAvailable = report.ResourcesAvailable
	if len(node.MigGpus) > 0 || len(report.MigGpus) > 0 {
		node.MigGpus = report.MigGpus
	}
	m.noteReportLocked(node)
	return newer
}

// noteReportLocked moves the node's idle clock on a resource report: a report with
// something taken is work seen now, and so is the first report with nothing taken after
// one with something (the work ended now). A report that changes nothing moves nothing.
// Callers hold mu.
func (m *nodeManager) noteReportLocked(node *pb.NodeInfo) {
	busy := reportShowsWork(node)
	if busy || m.reportBusy[node.NodeId] {
		m.lastWork[node.NodeId] = m.now()
	}
	m.reportBusy[node.NodeId] = busy
}

// reportShowsWork: the raylet reports less of some resource available than the node's
// total, so a bundle or a worker lease holds it. Unparsable amounts count as work (the
// node is never wrongly called idle).
func reportShowsWork(node *pb.NodeInfo) bool {
	total, err := resources.SetFromFloat(node.ResourcesTotal)
	if err != nil {
		return true
	}
	available, err := resources.SetFromFloat(node.ResourcesAvailable)
	if err != nil {
		return true
	}
	return !total.IsSubsetOf(available)
}

// noteWork records that work was seen on the node now (the autoscaler state saw a
// bundle or an actor on it).
func (m *nodeManager) noteWork(nodeID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if node, ok := m.nodes[nodeID]; ok && node.State == pb.NodeState_ALIVE {
		m.lastWork[nodeID] = m.now()
	}
}

// draining reports whether the node is marked draining.
func (m *nodeManager) draining(nodeID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	node, ok := m.nodes[nodeID]
	return ok && node.IsDraining
}

// nodeWork is a node row with what the node manager knows of its work.
type nodeWork struct {
	node *pb.NodeInfo
	// lastWork: see nodeManager.lastWork (zero for a DEAD node).
	lastWork time.Time
	// reportBusy: its raylet last reported something taken.
	reportBusy bool
}

// nodesWithWork returns copies of every node with its idle-clock state.
func (m *nodeManager) nodesWithWork() []nodeWork {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]nodeWork, 0, len(m.nodes))
	for id, n := range m.nodes {
		if _, ok := m.lastWork[id]; !ok && n.State == pb.NodeState_ALIVE {
			// Reloaded after a GCS restart and not re-registered: this GCS starts the
			// clock when it first looks.
			m.lastWork[id] = m.now()
		}
		out = append(out, nodeWork{node: proto.Clone(n).(*pb.NodeInfo), lastWork: m.lastWork[id], reportBusy: m.reportBusy[id]})
	}
	return out
}

// resourcesReported tells the listeners that a raylet reported newer resources: pending
// work may fit now. hasMIG: the node has MIG GPUs, whose slot maps came with the report.
// Callers hold no lock.
func (m *nodeManager) resourcesReported(hasMIG bool) {
	for _, l := range m.listeners {
		l.onResourcesReported(hasMIG)
	}
}

// applyResourceReport records the report a raylet returned with a bundle call.
func (m *nodeManager) applyResourceReport(nodeID string, report *pb.ResourceReport) {
	if report == nil {
		return
	}
	m.mu.Lock()
	newer, hasMIG := false, false
	if node, ok := m.nodes[nodeID]; ok && node.State == pb.NodeState_ALIVE {
		newer = m.applyResourcesLocked(node, report)
		hasMIG = len(node.MigGpus) > 0
	}
	m.mu.Unlock()
	if newer {
		m.resourcesReported(hasMIG)
	}
}

var _ nodeDirectory = (*nodeManager)(nil)

// idleGPUsByGroup sums the alive nodes' allocated idle GPUs by placement group.
func (m *nodeManager) idleGPUsByGroup() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for nodeID, byGroup := range m.idleGPUs {
		if n := m.nodes[nodeID]; n == nil || n.State != pb.NodeState_ALIVE {
			continue
		}
		for group, count := range byGroup {
			out[group] += int(count)
		}
	}
	return out
}
