package raylet

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/raygo-dev/raygo/internal/auth"
	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/ids"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// workerState is where a worker is in its life; a killed or exited worker is no longer
// in the pool at all.
type workerState int

const (
	// workerStarting: the process runs but has not called RegisterWorker; it holds the
	// lease it was started for, which is not handed out yet.
	workerStarting workerState = iota
	workerLeased
	workerIdle
)

// workerKey is what must match for an idle worker to serve a lease: the environment
// it was started with, so what a worker reads from its environment (its GPUs, its
// resources, its bundle) always describes the lease it serves.
type workerKey struct {
	jobID, executableSHA256, cudaVisibleDevices string
	// leaseEnv is the rest of the lease's environment: RAYGO_RESOURCES and the bundle.
	leaseEnv string
	// python is a Python worker's command (pythonCommand); empty for an executable.
	python string
}

// newWorkerKey is the key of a worker started for req and lease.
func newWorkerKey(req *pb.RequestWorkerLeaseRequest, lease *workerLease) workerKey {
	env := lease.resources.String()
	if lease.holder != nil {
		env += " " + lease.bundle.String()
	}
	if lease.lessee != "" {
		env += " lessee=" + lease.lessee // a tenant's worker serves that tenant alone
	}
	return workerKey{jobID: req.JobId, executableSHA256: req.ExecutableSha256, cudaVisibleDevices: lease.cudaVisibleDevices, leaseEnv: env,
		python: pythonCommand(req.PythonWorker)}
}

// pythonWorkerModule is what a Python worker runs: `<interpreter> -m raygo._worker_main`.
const pythonWorkerModule = "raygo._worker_main"

// pythonCommand describes a Python worker's interpreter, directory and path as one
// comparable string ("" for none), so only a worker started the same way is reused.
func pythonCommand(p *pb.PythonWorker) string {
	if p == nil {
		return ""
	}
	return p.Interpreter + "\x00" + p.WorkingDir + "\x00" + strings.Join(p.SysPath, string(os.PathListSeparator))
}

// validatePythonWorker checks a Python worker request: a Python job names no executable
// and an absolute interpreter path.
func validatePythonWorker(req *pb.RequestWorkerLeaseRequest) error {
	p := req.PythonWorker
	if req.ExecutableSha256 != "" {
		return fielderr.New(ErrInvalidLease, "executable_sha256", "must be empty with python_worker (a Python worker runs its interpreter)")
	}
	if !filepath.IsAbs(p.Interpreter) {
		return fielderr.New(ErrInvalidLease, "python_worker.interpreter", "want an absolute path, got %q", p.Interpreter)
	}
	if p.WorkingDir != "" && !filepath.IsAbs(p.WorkingDir) {
		return fielderr.New(ErrInvalidLease, "python_worker.working_dir", "want an absolute path, got %q", p.WorkingDir)
	}
	return nil
}

// worker is one worker process the raylet started. The fields after the channels are
// guarded by the raylet's mutex.
type worker struct {
	id         string
	key        workerKey
	cmd        *exec.Cmd
	stderrPath string        // "" when stderr goes to the raylet's own
	registered chan struct{} // closed by RegisterWorker
	exited     chan struct{} // closed by the death watch once exitDetail is set

	// bundle and bundleHolder name the bundle reservation the worker was started for
	// (its environment names it); bundleHolder is nil for a worker started for a lease
	// from the node. An idle worker keeps them, so it dies with its bundle.
	bundle       bundleID
	bundleHolder *reservation

	process    *os.Process // nil until the process started
	address    string      // set by RegisterWorker
	state      workerState
	lease      *workerLease // nil when idle
	actorID    string
	detached   bool
	idleSince  time.Time
	killReason string // set when the raylet killed it on purpose
	// registrationSHA256 is the SHA-256 of a tenant's actor's worker's token
	// (workerToken) until it registers; "" after, and for any other worker.
	registrationSHA256 string
	exitDetail         string
}

// workerIDBytes is the size of a worker id, as Ray's WorkerID.
const workerIDBytes = 28

func newWorkerID() string { return ids.Random(workerIDBytes) }

// stderrTailBytes is how much of a failed worker's stderr an error message quotes.
const stderrTailBytes = 2048

// validateLeaseRequest checks a lease request, cheapest checks first, and returns its
// resources.
func validateLeaseRequest(req *pb.RequestWorkerLeaseRequest) (resources.Set, error) {
	if req.JobId == "" {
		return nil, fielderr.New(ErrRequired, "job_id", "required")
	}
	if req.PythonWorker != nil {
		if err := validatePythonWorker(req); err != nil {
			return nil, err
		}
	} else if err := checkSHA256(req.ExecutableSha256); err != nil {
		return nil, err
	}
	if req.PlacementGroupId != "" && req.BundleIndex < resources.AnyBundle {
		return nil, fielderr.New(ErrInvalidLease, "bundle_index", "%d; want a bundle index, or -1 for any bundle of the group here", req.BundleIndex)
	}
	return validateLeaseResources(req.Resources)
}

// requestWorkerLease leases a worker for req: it takes the resources (waiting for room
// when the request queues), then hands them to an idle worker or a new one.
func (r *Raylet) requestWorkerLease(ctx context.Context, req *pb.RequestWorkerLeaseRequest) (*pb.RequestWorkerLeaseReply, error) {
	request, err := validateLeaseRequest(req)
	if err != nil {
		return nil, err
	}
	lease, err := r.reserveLease(ctx, req, request)
	if err != nil {
		return nil, err
	}
	tenant := lesseeFrom(ctx) // a tenant's own lease
	lease.lessee, lease.lesseeToken = tenant.tokenSHA256, tenant.token
	if lease.lessee == "" {
		lease.lessee = req.LesseeTokenSha256 // the GCS's, for a tenant's actor (scopeInterceptor)
	}
	w, err := r.leaseWorker(ctx, req, lease)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := ctx.Err(); err != nil {
		// The caller gave up: the reply would be lost, and the lease with it.
		if r.workers[w.id] == w && w.state == workerLeased {
			r.returnWorkerLocked(w, false)
		}
		return nil, err
	}
	if r.stoppingLocked() { // Stop kills the worker, if it has not yet
		return nil, r.errStopping()
	}
	if req.ActorId != "" {
		// An actor has one worker: another one here is from an earlier lease whose reply
		// the GCS lost before it asked again.
		for _, other := range r.workers {
			if other != w && other.actorID == req.ActorId {
				r.killWorkerLocked(other, "replaced by a newer lease for actor "+req.ActorId)
			}
		}
	}
	return &pb.RequestWorkerLeaseReply{Worker: r.describeWorkerLocked(w), Resources: r.resourceReportLocked()}, nil
}

// reserveLease takes the lease's resources, waiting for room when the request queues.
func (r *Raylet) reserveLease(ctx context.Context, req *pb.RequestWorkerLeaseRequest, request resources.Set) (*workerLease, error) {
	leaseID := newWorkerID()
	for {
		r.mu.Lock()
		lease, err := r.reserveLeaseLocked(leaseID, req, request)
		room := r.roomFreed
		r.mu.Unlock()
		if err == nil || !errors.Is(err, ErrNoRoom) || !req.Queue {
			return lease, err
		}
		select {
		case <-room:
		case <-ctx.Done():
			return nil, refusef(ctx.Err(), "waited for room until the call ended: %s", err)
		case <-r.stop:
			return nil, r.errStopping()
		}
	}
}

func (r *Raylet) reserveLeaseLocked(leaseID string, req *pb.RequestWorkerLeaseRequest, request resources.Set) (*workerLease, error) {
	if r.stoppingLocked() {
		return nil, r.errStopping()
	}
	if r.draining {
		return nil, refusef(ErrDraining, "node %s is draining and takes no new worker leases", r.cfg.NodeID)
	}
	var lease *workerLease
	var err error
	if req.PlacementGroupId != "" {
		lease, err = r.bundles.leaseFromBundle(r.cfg.NodeID, leaseID, req.PlacementGroupId, req.BundleIndex, request)
	} else {
		lease, err = r.bundles.leaseFromNode(r.cfg.NodeID, leaseID, request)
	}
	if err != nil {
		return nil, err
	}
	r.resourcesVersion++
	return lease, nil
}

// stoppingLocked tells whether Stop began. Stop closes r.stop before it kills the
// workers under mu, so a lease checked under mu after that sees it: no worker starts
// after the sweep. Callers hold mu.
func (r *Raylet) stoppingLocked() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

func (r *Raylet) errStopping() error {
	return refusef(ErrStopping, "node %s: raylet stopping", r.cfg.NodeID)
}

// releaseLease gives back a lease no worker holds yet.
func (r *Raylet) releaseLease(lease *workerLease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bundles.releaseLease(lease)
	r.resourcesChangedLocked()
}

// resourcesChangedLocked bumps the report version and wakes the lease requests that
// wait for room. Callers hold mu.
func (r *Raylet) resourcesChangedLocked() {
	r.resourcesVersion++
	close(r.roomFreed)
	r.roomFreed = make(chan struct{})
}

// leaseWorker hands the lease to an idle worker with the same environment, or starts
// one and waits until it registers. On failure the lease is released.
func (r *Raylet) leaseWorker(ctx context.Context, req *pb.RequestWorkerLeaseRequest, lease *workerLease) (*worker, error) {
	if req.PythonWorker == nil {
		// The pin keeps the executable cached until the worker is in the pool, whose live
		// workers keep theirs.
		release := r.executables.use(req.ExecutableSha256, time.Now())
		defer release()
	}
	key := newWorkerKey(req, lease)
	r.mu.Lock()
	if err := r.checkNotOrphanedLocked(lease); err != nil {
		r.mu.Unlock()
		return nil, err
	}
	if w := r.idleWorkerLocked(key); w != nil {
		w.state, w.lease, w.actorID, w.detached = workerLeased, lease, req.ActorId, req.Detached
		r.mu.Unlock()
		return w, nil
	}
	r.mu.Unlock()
	cmd, err := r.workerCommand(ctx, req)
	if err != nil {
		r.releaseLease(lease)
		return nil, err
	}
	w, err := r.startWorker(cmd, key, req, lease)
	if err != nil {
		return nil, err
	}
	return r.awaitRegistration(ctx, w)
}

// checkNotOrphanedLocked refuses a lease whose bundle was released while the request
// was waiting, and releases it.
func (r *Raylet) checkNotOrphanedLocked(lease *workerLease) error {
	if !r.bundles.orphaned(lease) {
		return nil
	}
	r.bundles.releaseLease(lease)
	r.resourcesChangedLocked()
	return refusef(ErrBundleNotHeld, "placement group %s bundle %d was released while the lease was being granted",
		lease.bundle.placementGroupID, lease.bundle.index)
}

// idleWorkerLocked picks the idle worker of that key that went idle last: the others
// then reach IdleWorkerTimeout and the pool shrinks to what the load needs.
func (r *Raylet) idleWorkerLocked(key workerKey) *worker {
	var best *worker
	for _, w := range r.workers {
		if w.state == workerIdle && w.key == key && (best == nil || w.idleSince.After(best.idleSince)) {
			best = w
		}
	}
	return best
}

// workerCommand is the command a new worker of req runs: the job's executable (fetched
// from the GCS on first use), or for a Python job its interpreter running the worker
// module in the driver's directory with the driver's sys.path.
func (r *Raylet) workerCommand(ctx context.Context, req *pb.RequestWorkerLeaseRequest) (*exec.Cmd, error) {
	p := req.PythonWorker
	if p == nil {
		path, err := r.executables.path(ctx, req.ExecutableSha256)
		if err != nil {
			return nil, err
		}
		return exec.Command(path), nil
	}
	if info, err := os.Stat(p.Interpreter); err != nil || info.IsDir() {
		return nil, fielderr.New(ErrInvalidLease, "python_worker.interpreter", "%s: not an interpreter on node %s (%v)", p.Interpreter, r.cfg.NodeID, err)
	}
	if p.WorkingDir != "" {
		if info, err := os.Stat(p.WorkingDir); err != nil || !info.IsDir() {
			return nil, fielderr.New(ErrInvalidLease, "python_worker.working_dir", "%s: not a directory on node %s (%v)", p.WorkingDir, r.cfg.NodeID, err)
		}
	}
	cmd := exec.Command(p.Interpreter, "-m", pythonWorkerModule)
	cmd.Dir = p.WorkingDir
	return cmd, nil
}

// startWorker starts cmd as a new worker holding lease. The worker joins the
// pool before its process starts, so a fast RegisterWorker always finds it; from then on
// the worker owns the lease, and killing it releases the lease.
func (r *Raylet) startWorker(cmd *exec.Cmd, key workerKey, req *pb.RequestWorkerLeaseRequest, lease *workerLease) (*worker, error) {
	w := &worker{
		id: newWorkerID(), key: key, registered: make(chan struct{}), exited: make(chan struct{}),
		state: workerStarting, lease: lease, actorID: req.ActorId, detached: req.Detached,
		bundle: lease.bundle, bundleHolder: lease.holder,
	}
	w.cmd = cmd
	token, err := r.workerToken(w)
	if err != nil {
		r.releaseLease(lease)
		return nil, err
	}
	w.cmd.Env = r.workerEnv(w.id, req.JobId, lease, token)
	if req.PythonWorker != nil {
		w.cmd.Env = append(w.cmd.Env, "PYTHONPATH="+strings.Join(req.PythonWorker.SysPath, string(os.PathListSeparator)))
	}
	// Workers die with their raylet, as Ray's. (Pdeathsig follows the thread that
	// started the child; the Go runtime does not end threads of goroutines that never
	// locked them.)
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	closeLogs, err := r.attachWorkerLogs(w)
	if err != nil {
		r.releaseLease(lease)
		return nil, err
	}
	defer closeLogs()

	r.mu.Lock()
	// The bundle may have gone while the executable downloaded; the kill of its
	// workers could not see this one yet.
	if err := r.checkNotOrphanedLocked(lease); err != nil {
		r.mu.Unlock()
		return nil, err
	}
	if r.stoppingLocked() { // stopWorkers may have swept the pool already
		r.bundles.releaseLease(lease)
		r.resourcesChangedLocked()
		r.mu.Unlock()
		return nil, r.errStopping()
	}
	r.workers[w.id] = w
	r.mu.Unlock()
	if err := w.cmd.Start(); err != nil {
		r.mu.Lock()
		delete(r.workers, w.id)
		r.bundles.releaseLease(lease)
		r.resourcesChangedLocked()
		r.mu.Unlock()
		return nil, refusef(ErrWorkerFailed, "start worker %s (%s): %w", w.id, w.cmd.Path, err)
	}
	r.mu.Lock()
	w.process = w.cmd.Process
	if w.killReason != "" { // killed while starting (job ended, bundle released)
		_ = w.process.Kill()
	}
	r.mu.Unlock()
	go r.watchWorker(w)
	r.log.Info().Str("worker_id", w.id).Int("pid", w.process.Pid).Str("job_id", req.JobId).Str("actor_id", req.ActorId).
		Str("cuda_visible_devices", lease.cudaVisibleDevices).Msg("worker started")
	return w, nil
}

// workerToken is the token worker w takes (RAYGO_AUTH_TOKEN), with auth on: the
// raylet's own for a lease with the cluster token; a tenant's own for its task worker,
// so its nested tasks run with its rights; for a tenant's actor, whose lease the GCS
// took with the tenant's token's hash alone, a random one that registers w with this
// raylet once and does nothing else (registrationSHA256). A tenant's code never holds
// the raylet's token, which may be the cluster token.
func (r *Raylet) workerToken(w *worker) (string, error) {
	switch {
	case r.cfg.AuthToken == "":
		return "", nil
	case w.lease.lessee == "":
		return r.cfg.AuthToken, nil
	case w.lease.lesseeToken != "":
		return w.lease.lesseeToken, nil
	}
	token, err := auth.Generate()
	if err != nil {
		return "", refusef(ErrInternal, "worker token: %w", err)
	}
	w.registrationSHA256 = auth.HashToken(token) // before w joins the pool
	return token, nil
}

// registrationScope is the raylet Verifier's answer for a starting worker's
// registration token (workerToken): ScopeNode, which reaches RegisterWorker alone.
func (r *Raylet) registrationScope(presented string) (auth.Scope, bool) {
	presentedHash := auth.HashToken(presented)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.workers {
		if w.registrationSHA256 != "" && auth.EqualHash(presentedHash, w.registrationSHA256) {
			return auth.Scope{Kind: auth.ScopeNode}, true
		}
	}
	return auth.Scope{}, false
}

// workerEnv is the raylet's environment without its RAYGO_* (but TLS's) and CUDA_*
// variables, plus the worker contract of protos/worker.proto; token is workerToken's.
func (r *Raylet) workerEnv(workerID, jobID string, lease *workerLease, token string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		tls := strings.HasPrefix(kv, rpcutil.EnvUseTLS+"=") || strings.HasPrefix(kv, "RAYGO_TLS_")
		return strings.HasPrefix(kv, "RAYGO_") && !tls || strings.HasPrefix(kv, "CUDA_")
	})
	resources, _ := json.Marshal(lease.resources.ToFloat()) // a map of floats always marshals
	env = append(env,
		"RAYGO_WORKER_ID="+workerID,
		"RAYGO_NODE_ID="+r.cfg.NodeID,
		"RAYGO_JOB_ID="+jobID,
		"RAYGO_RAYLET_ADDRESS="+r.Address(),
		"RAYGO_GCS_ADDRESS="+r.cfg.GCSAddress,
		"RAYGO_NODE_IP="+r.cfg.NodeIP,
		"RAYGO_RESOURCES="+string(resources),
	)
	if r.cfg.AuthToken != "" {
		// Its calls carry token (workerToken). Its server checks by hash the cluster
		// token, the GCS's credential and its tenant's token.
		env = append(env, auth.EnvToken+"="+token)
		// Set even when empty: with it, a worker never falls back to a token file.
		hash := r.learned.ClusterToken.Load()
		if hash == nil {
			hash = new(string)
		}
		env = append(env, auth.EnvTokenSHA256+"="+*hash)
		if gcs := r.learned.GCSCredential.Load(); gcs != nil && *gcs != "" {
			env = append(env, auth.EnvGCSCredentialSHA256+"="+auth.HashToken(auth.WorkerCredential(*gcs, workerID)))
		}
		if lease.lessee != "" {
			env = append(env, auth.EnvLesseeTokenSHA256+"="+lease.lessee)
		}
	}
	if lease.holder != nil {
		env = append(env,
			"RAYGO_PLACEMENT_GROUP_ID="+lease.bundle.placementGroupID,
			"RAYGO_BUNDLE_INDEX="+strconv.Itoa(int(lease.bundle.index)))
	}
	return append(env, "CUDA_VISIBLE_DEVICES="+lease.cudaVisibleDevices, "CUDA_DEVICE_ORDER=PCI_BUS_ID")
}

// attachWorkerLogs points the worker's stdout and stderr at its log files in
// WorkerLogDir, or at the raylet's own. The returned func closes the raylet's copies
// once the child has them.
func (r *Raylet) attachWorkerLogs(w *worker) (func(), error) {
	if r.cfg.WorkerLogDir == "" {
		w.cmd.Stdout, w.cmd.Stderr = os.Stdout, os.Stderr
		return func() {}, nil
	}
	if err := os.MkdirAll(r.cfg.WorkerLogDir, 0o755); err != nil {
		return nil, refusef(ErrInternal, "worker log directory: %w", err)
	}
	open := func(suffix string) (*os.File, error) {
		return os.OpenFile(filepath.Join(r.cfg.WorkerLogDir, "worker-"+w.id+suffix), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	}
	stdout, err := open(".out")
	if err != nil {
		return nil, refusef(ErrInternal, "worker %s log: %w", w.id, err)
	}
	stderr, err := open(".err")
	if err != nil {
		_ = stdout.Close()
		return nil, refusef(ErrInternal, "worker %s log: %w", w.id, err)
	}
	w.cmd.Stdout, w.cmd.Stderr, w.stderrPath = stdout, stderr, stderr.Name()
	return func() { _ = stdout.Close(); _ = stderr.Close() }, nil
}

// awaitRegistration waits for the worker's RegisterWorker and hands it the lease it was
// started for. A worker that exits, does not register within WorkerStartTimeout, or
// outlives the request that started it fails the lease (and is killed).
func (r *Raylet) awaitRegistration(ctx context.Context, w *worker) (*worker, error) {
	timer := time.NewTimer(r.cfg.WorkerStartTimeout)
	defer timer.Stop()
	select {
	case <-w.registered:
		r.mu.Lock()
		alive := r.workers[w.id] == w
		if alive {
			w.state = workerLeased
		}
		r.mu.Unlock()
		if alive {
			return w, nil
		}
		<-w.exited
		return nil, r.exitedBeforeLease(w)
	case <-w.exited:
		return nil, r.exitedBeforeLease(w)
	case <-timer.C:
		r.killWorker(w, "did not register in time")
		return nil, refusef(ErrWorkerStartTimeout, "worker %s did not call RegisterWorker within %s; killed it%s",
			w.id, r.cfg.WorkerStartTimeout, stderrTail(w.stderrPath))
	case <-ctx.Done():
		r.killWorker(w, "the lease request ended before the worker registered")
		return nil, ctx.Err()
	}
}

// exitedBeforeLease is the error for a worker gone before its lease was handed out:
// killed on purpose (ErrWorkerKilled), or crashed, most likely a bad executable
// (ErrWorkerFailed).
func (r *Raylet) exitedBeforeLease(w *worker) error {
	if strings.HasPrefix(w.exitDetail, "killed: ") {
		return refusef(ErrWorkerKilled, "worker %s was %s before its lease was granted", w.id, w.exitDetail)
	}
	return refusef(ErrWorkerFailed, "worker %s exited before registering: %s%s", w.id, w.exitDetail, stderrTail(w.stderrPath))
}

// stderrTail quotes the end of a worker's stderr file for an error message.
func stderrTail(path string) string {
	if path == "" {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Size() > stderrTailBytes {
		_, _ = f.Seek(-stderrTailBytes, io.SeekEnd)
	}
	tail, _ := io.ReadAll(f)
	if text := strings.TrimSpace(string(tail)); text != "" {
		return "; stderr: " + text
	}
	return ""
}

// registerWorker records the address of a worker this raylet started and wakes the
// lease request waiting for it. A retried registration with the same address is fine.
func (r *Raylet) registerWorker(workerID, address string) error {
	if address == "" {
		return fielderr.New(ErrRequired, "address", "required")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.workers[workerID]
	if w == nil {
		return refusef(ErrUnknownWorker, "worker %s: not a live worker of node %s", workerID, r.cfg.NodeID)
	}
	if r.stoppingLocked() {
		r.killWorkerLocked(w, "raylet stopped")
		return r.errStopping()
	}
	switch w.address {
	case "":
		w.address = address
		w.registrationSHA256 = "" // its registration token served once
		close(w.registered)
	case address: // a retried registration
	default:
		return refusef(ErrWorkerRegistered, "worker %s registered already with address %s", workerID, w.address)
	}
	return nil
}

// setWorkerBlocked marks a leased worker as blocked in get/wait on tasks it submitted, or
// running again. A blocked worker's lease lends its CPU to other leases (workerLease.held),
// so the requests waiting for room are woken; unblocking takes the CPU back at once.
func (r *Raylet) setWorkerBlocked(workerID string, blocked bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.workers[workerID]
	if w == nil || w.state != workerLeased || w.lease == nil {
		return refusef(ErrUnknownWorker, "worker %s: not a leased worker of node %s", workerID, r.cfg.NodeID)
	}
	if w.lease.blocked == blocked {
		return nil
	}
	w.lease.blocked = blocked
	r.resourcesChangedLocked()
	return nil
}

// describeWorkerLocked is a worker as WorkerInfo.
func (r *Raylet) describeWorkerLocked(w *worker) *pb.WorkerInfo {
	info := &pb.WorkerInfo{
		WorkerId: w.id, Address: w.address, NodeId: r.cfg.NodeID, JobId: w.key.jobID, ExecutableSha256: w.key.executableSHA256,
		Leased: w.state == workerLeased, BundleIndex: -1, CudaVisibleDevices: w.key.cudaVisibleDevices,
	}
	if w.process != nil {
		info.Pid = int64(w.process.Pid)
	}
	if l := w.lease; l != nil {
		info.ActorId = w.actorID
		info.Resources = l.resources.ToFloat()
		info.BundleIndex = l.bundleIndex()
		info.GpuIds = l.gpuIDs
		if l.holder != nil {
			info.PlacementGroupId = l.bundle.placementGroupID
		}
	}
	return info
}
