package sdk

import (
	"context"
	"fmt"
	"net"
	"os"
	"reflect"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/internal/auth"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// Worker mode. A raylet runs the driver's own executable as a worker, with
// RAYGO_WORKER_ID and the variables below set. ServeIfWorker (which Connect calls first)
// then serves tasks and actor calls and never returns: the program's main does not go on.
const (
	envWorkerID         = "RAYGO_WORKER_ID"
	envNodeID           = "RAYGO_NODE_ID"
	envJobID            = "RAYGO_JOB_ID"
	envRayletAddress    = "RAYGO_RAYLET_ADDRESS"
	envNodeIP           = "RAYGO_NODE_IP"
	envPlacementGroupID = "RAYGO_PLACEMENT_GROUP_ID"
	envBundleIndex      = "RAYGO_BUNDLE_INDEX"
)

// WorkerContext describes the worker process a task or actor runs in.
type WorkerContext struct {
	WorkerID, NodeID, JobID string
	PID                     int
	// CUDAVisibleDevices is the worker's CUDA_VISIBLE_DEVICES: GPU indices (with
	// CUDA_DEVICE_ORDER=PCI_BUS_ID), MIG device UUIDs, or empty without GPUs.
	CUDAVisibleDevices string
	// PlacementGroupID and BundleIndex name the bundle the worker holds resources
	// from; empty and -1 outside placement groups.
	PlacementGroupID string
	BundleIndex      int
}

// IsWorker reports whether this process is a raygo worker.
func IsWorker() bool { return os.Getenv(envWorkerID) != "" }

// CurrentWorker describes this worker process; ok is false in a driver.
func CurrentWorker() (w WorkerContext, ok bool) {
	if !IsWorker() {
		return WorkerContext{}, false
	}
	bundle := -1
	if s := os.Getenv(envBundleIndex); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			bundle = n
		}
	}
	return WorkerContext{
		WorkerID: os.Getenv(envWorkerID), NodeID: os.Getenv(envNodeID), JobID: os.Getenv(envJobID), PID: os.Getpid(),
		CUDAVisibleDevices: os.Getenv("CUDA_VISIBLE_DEVICES"), PlacementGroupID: os.Getenv(envPlacementGroupID), BundleIndex: bundle,
	}, true
}

// ServeIfWorker returns at once in a driver. In a worker process it serves the
// registered tasks and actors until the raylet kills the process, and never returns.
// Connect calls it first; call it yourself at the top of main when main does work
// before Connect that workers must not repeat.
func ServeIfWorker() {
	if !IsWorker() {
		return
	}
	if err := serveWorker(); err != nil {
		fmt.Fprintf(os.Stderr, "raygo worker %s: %v\n", os.Getenv(envWorkerID), err)
		os.Exit(1)
	}
	os.Exit(0)
}

func serveWorker() error {
	w := &workerService{id: os.Getenv(envWorkerID)}
	nodeIP := os.Getenv(envNodeIP)
	if nodeIP == "" {
		nodeIP = "127.0.0.1"
	}
	listener, err := net.Listen("tcp", net.JoinHostPort(nodeIP, "0"))
	if err != nil {
		return fmt.Errorf("listen on %s: %w", nodeIP, err)
	}
	// The raylet passes its token on (RAYGO_AUTH_TOKEN; a tenant's worker gets its
	// tenant's, or none), and the SHA-256s of the tokens whose calls this worker serves:
	// the cluster token's (RAYGO_AUTH_TOKEN_SHA256: drivers), the GCS's credential's
	// (RAYGO_GCS_CREDENTIAL_SHA256: the GCS) and its tenant's (RAYGO_LESSEE_TOKEN_SHA256).
	token, err := auth.Load()
	if err != nil {
		return err
	}
	verify := auth.ClusterToken(token)
	if hash, underRaylet := os.LookupEnv(auth.EnvTokenSHA256); underRaylet {
		var learned auth.LearnedHashes
		lessee := os.Getenv(auth.EnvLesseeTokenSHA256)
		if hash == "" && lessee == "" && token != "" {
			hash = auth.HashToken(token) // the raylet's own token is the cluster token
		}
		learned.ClusterToken.Store(&hash)
		if gcs := os.Getenv(auth.EnvGCSCredentialSHA256); gcs != "" {
			learned.GCSCredential.Store(&gcs)
		}
		if lessee != "" {
			learned.Lessee.Store(&lessee) // the tenant this worker is leased to
		}
		verify = auth.ClusterTokenHash(&learned, "")
	}
	serverOptions, err := rpcutil.VerifiedServerOptions(rpcutil.ProtocolVersion, verify)
	if err != nil {
		return err
	}
	server := grpc.NewServer(serverOptions...)
	pb.RegisterCoreWorkerServiceServer(server, w)
	served := make(chan error, 1)
	go func() { served <- server.Serve(listener) }()

	conn, err := rpcutil.Dial(os.Getenv(envRayletAddress), rpcutil.DialOptions{})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_, err = pb.NewNodeManagerServiceClient(conn).RegisterWorker(ctx, &pb.RegisterWorkerRequest{
		WorkerId: w.id, Address: listener.Addr().String(), Pid: int64(os.Getpid()),
	})
	cancel()
	if err != nil {
		return fmt.Errorf("register with the raylet at %s: %w", os.Getenv(envRayletAddress), err)
	}
	// The raylet kills its workers (and the kernel does when it dies: parent-death
	// signal); an orphan whose parent changed exits too, in case the signal was missed.
	parent := os.Getppid()
	for {
		select {
		case err := <-served:
			return err
		case <-time.After(time.Second):
			if os.Getppid() != parent {
				return nil
			}
		}
	}
}

// workerService runs tasks and hosts at most one actor. Calls run one at a time: a
// task worker is leased to one task at a time, and an actor runs its calls in order.
type workerService struct {
	pb.UnimplementedCoreWorkerServiceServer
	id string

	mu        sync.Mutex
	actorID   string
	actorType *actorType
	actor     reflect.Value
}

func (w *workerService) CreateActor(ctx context.Context, req *pb.CreateActorOnWorkerRequest) (*pb.CreateActorOnWorkerReply, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.actorID != "" {
		if w.actorID == req.ActorId {
			return &pb.CreateActorOnWorkerReply{Pid: int64(os.Getpid())}, nil // a retried request
		}
		return nil, status.Errorf(codes.FailedPrecondition, "worker %s already hosts actor %s", w.id, w.actorID)
	}
	at, err := lookupActor(req.ClassName)
	if err != nil {
		return &pb.CreateActorOnWorkerReply{Error: &pb.TaskError{Type: "*sdk.RegistrationError", Message: err.Error()}, Pid: int64(os.Getpid())}, nil
	}
	actor, _, taskErr := at.constructor.call(ctx, reflect.Value{}, req.ConstructorArgs)
	if taskErr != nil {
		return &pb.CreateActorOnWorkerReply{Error: taskErr, Pid: int64(os.Getpid())}, nil
	}
	w.actorID, w.actorType, w.actor = req.ActorId, at, actor
	if cp, ok := actor.Interface().(Checkpointer); ok && os.Getenv(envPlacementGroupID) != "" {
		go w.watchCheckpoint(os.Getenv(envPlacementGroupID), req.ActorId, cp)
	}
	return &pb.CreateActorOnWorkerReply{Pid: int64(os.Getpid())}, nil
}

func (w *workerService) PushTask(ctx context.Context, req *pb.PushTaskRequest) (*pb.PushTaskReply, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	reply := &pb.PushTaskReply{WorkerId: w.id, Pid: int64(os.Getpid())}
	var fn *function
	receiver := reflect.Value{}
	if req.ActorId != "" {
		if req.ActorId != w.actorID {
			return nil, status.Errorf(codes.FailedPrecondition, "worker %s does not host actor %s", w.id, req.ActorId)
		}
		m, err := w.actorType.method(req.FunctionName)
		if err != nil {
			reply.Error = &pb.TaskError{Type: "*sdk.RegistrationError", Message: err.Error()}
			return reply, nil
		}
		fn, receiver = m, w.actor
	} else {
		f, err := lookupTask(req.FunctionName)
		if err != nil {
			reply.Error = &pb.TaskError{Type: "*sdk.RegistrationError", Message: err.Error()}
			return reply, nil
		}
		fn = f
	}
	_, result, taskErr := fn.call(ctx, receiver, req.Args)
	reply.Error = taskErr
	if result != nil {
		reply.Returns = [][]byte{result}
	}
	return reply, nil
}
