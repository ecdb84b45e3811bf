package sdk

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// DefaultAddress is the GCS address when neither Options.Address nor RAYGO_ADDRESS says.
const DefaultAddress = "127.0.0.1:6380"

// Options configure Connect.
type Options struct {
	// Address of the GCS (host:port); empty means RAYGO_ADDRESS, else DefaultAddress.
	Address string
	// Namespace of the job's named placement groups; empty means "default".
	Namespace string
	// Entrypoint describes the program in the job table; empty means os.Args[0].
	Entrypoint string
}

// Client is a connection to a raygo cluster, registered as one job. Its methods are
// safe for concurrent use.
type Client struct {
	address   string
	namespace string
	conn      *grpc.ClientConn
	nodes     pb.NodeInfoServiceClient
	jobs      pb.JobInfoServiceClient
	pgs       pb.PlacementGroupServiceClient
	actors    pb.ActorInfoServiceClient
	// executables uploads this program for its workers; executable is its hash, empty
	// when the program registers no task or actor (it then starts no workers).
	executables pb.ExecutableServiceClient
	executable  string
	jobID       string

	// tasks submits tasks over worker leases; raylets and workers are the
	// connections it keeps to raylets and to leased workers, by address.
	tasks   *taskSubmitter
	connsMu sync.Mutex
	conns   map[string]*grpc.ClientConn
	// bundleShapes: placement-group id → its bundles' resources (groupBundles).
	bundleShapes sync.Map
	// incarnations: where each actor this client calls runs (see Actor).
	actorsMu     sync.Mutex
	incarnations map[string]*incarnation

	stopRenewal chan struct{}
	closeOnce   sync.Once
}

// Connect reaches the GCS, registers a job and keeps its lease renewed until Close.
// When the program registered tasks or actors, it uploads the program's executable so
// raylets can start it as workers (once per content: an executable the GCS already
// holds is not sent again).
//
// In a worker process (started by a raylet) Connect never returns: it serves the
// registered tasks and actors until the raylet ends the process (see ServeIfWorker).
func Connect(ctx context.Context, opts Options) (*Client, error) {
	ServeIfWorker()
	address := opts.Address
	if address == "" || address == "auto" {
		address = os.Getenv("RAYGO_ADDRESS")
	}
	if address == "" || address == "auto" {
		address = DefaultAddress
	}
	if _, _, err := net.SplitHostPort(address); err != nil {
		return nil, fmt.Errorf("%w: address %q: must be HOST:PORT", ErrInvalidArgument, address)
	}
	conn, err := rpcutil.Dial(address, rpcutil.DialOptions{})
	if err != nil {
		return nil, err
	}
	c := &Client{
		address: address, conn: conn, stopRenewal: make(chan struct{}),
		nodes: pb.NewNodeInfoServiceClient(conn), jobs: pb.NewJobInfoServiceClient(conn),
		pgs: pb.NewPlacementGroupServiceClient(conn), actors: pb.NewActorInfoServiceClient(conn),
		executables: pb.NewExecutableServiceClient(conn), conns: map[string]*grpc.ClientConn{},
		incarnations: map[string]*incarnation{},
	}
	c.tasks = newTaskSubmitter(c)
	entrypoint := opts.Entrypoint
	if entrypoint == "" && len(os.Args) > 0 {
		entrypoint = os.Args[0]
	}
	var self executableHash
	if hasRegistrations() {
		// The job names its executable, so the GCS keeps it while the job lives.
		if self, err = hashExecutable(); err != nil {
			_ = conn.Close()
			return nil, err
		}
	}
	registered := time.Now() // the job's lease runs from its registration
	reply, err := c.jobs.AddJob(ctx, &pb.AddJobRequest{Namespace: opts.Namespace, DriverIp: "127.0.0.1", DriverPid: int64(os.Getpid()),
		Entrypoint: entrypoint, ExecutableSha256: self.sha256})
	if err != nil {
		_ = conn.Close()
		return nil, c.wrap("connect", err)
	}
	c.jobID = reply.Job.JobId
	c.namespace = reply.Job.Namespace
	if self.sha256 != "" {
		if c.executable, err = c.uploadExecutable(ctx); err != nil {
			_, _ = c.jobs.MarkJobFinished(ctx, &pb.MarkJobFinishedRequest{JobId: c.jobID})
			_ = conn.Close()
			return nil, err
		}
	}
	go c.renewLease(registered, time.Duration(reply.LeaseTimeoutMs)*time.Millisecond)
	return c, nil
}

// renewLease renews the job's lease until Close: every third of the lease, and after a
// failed renewal again soon (renewalPlan), so a GCS that is briefly down or stalled is
// retried while the lease still holds.
func (c *Client) renewLease(registered time.Time, lease time.Duration) {
	if lease <= 0 {
		lease = 3 * time.Second
	}
	renewed, failures := registered, 0
	for {
		wait, timeout := renewalPlan(renewed, time.Now(), failures, lease)
		timer := time.NewTimer(wait)
		select {
		case <-c.stopRenewal:
			timer.Stop()
			return
		case <-timer.C:
		}
		sent := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		_, err := c.jobs.RenewJobLease(ctx, &pb.RenewJobLeaseRequest{JobId: c.jobID})
		cancel()
		if err != nil {
			failures++
			continue
		}
		renewed, failures = sent, 0
	}
}

// renewalRetryMin is the pause before a failed lease renewal is sent again, doubling
// per failure up to a third of the lease.
const renewalRetryMin = 100 * time.Millisecond

// renewalPlan says when to send the job's next lease renewal and how long it may take.
// renewed is when the last renewal the GCS accepted was sent (registering counts as
// one): the lease holds until renewed+lease at least. Renewals go every third of the
// lease; after failures failed ones in a row, the next goes after renewalRetryMin doubled
// per failure (at most a third of the lease). A renewal may take until the lease would
// run out, and at least a third of the lease once it has (the GCS then answers whether
// it ended the job).
func renewalPlan(renewed, now time.Time, failures int, lease time.Duration) (wait, timeout time.Duration) {
	every := lease / 3
	if failures == 0 {
		wait = renewed.Add(every).Sub(now)
	} else {
		wait = every
		if failures < 32 {
			wait = min(renewalRetryMin<<(failures-1), every)
		}
	}
	wait = max(wait, 0)
	timeout = max(renewed.Add(lease).Sub(now.Add(wait)), every)
	return wait, timeout
}

// Address is the GCS address the client talks to.
func (c *Client) Address() string { return c.address }

// JobID is the job this client registered.
func (c *Client) JobID() string { return c.jobID }

// Namespace is the job's namespace.
func (c *Client) Namespace() string { return c.namespace }

// Close ends the job (its non-detached placement groups are removed) and the connection.
func (c *Client) Close() error {
	var err error
	c.closeOnce.Do(func() {
		close(c.stopRenewal)
		c.tasks.close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, e := c.jobs.MarkJobFinished(ctx, &pb.MarkJobFinishedRequest{JobId: c.jobID}); e != nil {
			err = c.wrap("close", e)
		}
		_ = c.conn.Close()
		c.connsMu.Lock()
		for _, conn := range c.conns {
			_ = conn.Close()
		}
		c.conns = nil
		c.connsMu.Unlock()
	})
	return err
}

// connTo returns the client's connection to a raylet or worker at address.
func (c *Client) connTo(address string) (*grpc.ClientConn, error) {
	c.connsMu.Lock()
	defer c.connsMu.Unlock()
	if c.conns == nil {
		return nil, ErrClosed
	}
	if conn, ok := c.conns[address]; ok {
		return conn, nil
	}
	conn, err := rpcutil.Dial(address, rpcutil.DialOptions{})
	if err != nil {
		return nil, err
	}
	c.conns[address] = conn
	return conn, nil
}

// forgetConn closes the connection to a worker that died.
func (c *Client) forgetConn(address string) {
	c.connsMu.Lock()
	defer c.connsMu.Unlock()
	if conn, ok := c.conns[address]; ok {
		_ = conn.Close()
		delete(c.conns, address)
	}
}

// requireExecutable fails when the program registered nothing, so workers could not
// run what the caller asks.
func (c *Client) requireExecutable(what string) error {
	if c.executable == "" {
		return fmt.Errorf("%w: %s: this program registered no task or actor before Connect (sdk.RegisterTask, sdk.RegisterActor), so no worker can run it", ErrInvalidArgument, what)
	}
	return nil
}

// wrap turns a gRPC error into one of the package's errors, keeping the server's message.
func (c *Client) wrap(op string, err error) error {
	s, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %w", op, err)
	}
	switch s.Code() {
	case codes.InvalidArgument:
		return fmt.Errorf("%s: %w: %s", op, ErrInvalidArgument, s.Message())
	case codes.NotFound:
		return fmt.Errorf("%s: %w: %s", op, ErrNotFound, s.Message())
	case codes.AlreadyExists:
		return fmt.Errorf("%s: %w: %s", op, ErrAlreadyExists, s.Message())
	case codes.Unavailable:
		return fmt.Errorf("%s: %w at %s: %s", op, ErrUnavailable, c.address, s.Message())
	case codes.DeadlineExceeded:
		return fmt.Errorf("%s: %w", op, context.DeadlineExceeded)
	case codes.Canceled:
		return fmt.Errorf("%s: %w", op, context.Canceled)
	}
	return fmt.Errorf("%s: %s", op, s.Message())
}
