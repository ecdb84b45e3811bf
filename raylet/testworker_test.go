package raylet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/gcs"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	"github.com/raygo-dev/raygo/internal/testutil/poll"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// The test binary is also the worker executable: a raylet under test starts it with
// RAYGO_WORKER_ID set, and it then runs testWorkerMain instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv("RAYGO_WORKER_ID") != "" {
		os.Exit(testWorkerMain())
	}
	os.Exit(m.Run())
}

// testWorkerModeEnv makes the test worker misbehave: "exit" exits with status 3 before
// registering, "hang" never registers. The raylet passes it on (it is no RAYGO_ or
// CUDA_ variable).
const testWorkerModeEnv = "RAYLET_TESTWORKER_MODE"

// testWorkerEnvVars are the variables the "env" task returns, in order.
var testWorkerEnvVars = []string{
	"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "RAYGO_RESOURCES", "RAYGO_PLACEMENT_GROUP_ID", "RAYGO_BUNDLE_INDEX",
	"RAYGO_JOB_ID", "RAYGO_WORKER_ID", "RAYGO_NODE_ID",
}

// unsetMarker is what the "env" task returns for a variable that is not set at all.
const unsetMarker = "<unset>"

// testWorkerMain is a minimal worker: it serves CoreWorkerService on RAYGO_NODE_IP,
// registers with its raylet and runs until killed.
func testWorkerMain() int {
	switch os.Getenv(testWorkerModeEnv) {
	case "exit":
		fmt.Fprintln(os.Stderr, "test worker: exiting on purpose before registering")
		return 3
	case "hang":
		select {}
	}
	listener, err := net.Listen("tcp", net.JoinHostPort(os.Getenv("RAYGO_NODE_IP"), "0"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "test worker:", err)
		return 4
	}
	serverOptions, err := rpcutil.ServerOptions(rpcutil.ProtocolVersion, "")
	if err != nil {
		fmt.Fprintln(os.Stderr, "test worker:", err)
		return 4
	}
	server := grpc.NewServer(serverOptions...)
	pb.RegisterCoreWorkerServiceServer(server, testCoreWorker{})
	go func() { _ = server.Serve(listener) }()

	conn, err := rpcutil.Dial(os.Getenv("RAYGO_RAYLET_ADDRESS"), rpcutil.DialOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "test worker:", err)
		return 4
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = pb.NewNodeManagerServiceClient(conn).RegisterWorker(ctx, &pb.RegisterWorkerRequest{
		WorkerId: os.Getenv("RAYGO_WORKER_ID"), Address: listener.Addr().String(), Pid: int64(os.Getpid()),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "test worker: register:", err)
		return 5
	}
	select {}
}

type testCoreWorker struct {
	pb.UnimplementedCoreWorkerServiceServer
}

func (testCoreWorker) PushTask(ctx context.Context, req *pb.PushTaskRequest) (*pb.PushTaskReply, error) {
	if req.FunctionName != "env" {
		return nil, status.Errorf(codes.NotFound, "function_name: the test worker has only \"env\", got %q", req.FunctionName)
	}
	reply := &pb.PushTaskReply{WorkerId: os.Getenv("RAYGO_WORKER_ID"), Pid: int64(os.Getpid())}
	for _, name := range testWorkerEnvVars {
		value, ok := os.LookupEnv(name)
		if !ok {
			value = unsetMarker
		}
		reply.Returns = append(reply.Returns, []byte(value))
	}
	return reply, nil
}

// workerEnv is what a test worker reports of its environment.
type workerEnv struct {
	vars map[string]string
	pid  int64
}

// askEnv runs the "env" task on a worker.
func askEnv(t *testing.T, info *pb.WorkerInfo) workerEnv {
	t.Helper()
	conn, err := rpcutil.Dial(info.Address, rpcutil.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reply, err := pb.NewCoreWorkerServiceClient(conn).PushTask(ctx, &pb.PushTaskRequest{TaskId: "t", FunctionName: "env"})
	if err != nil {
		t.Fatalf("env task on worker %s: %v", info.WorkerId, err)
	}
	env := workerEnv{vars: map[string]string{}, pid: reply.Pid}
	for i, name := range testWorkerEnvVars {
		env.vars[name] = string(reply.Returns[i])
	}
	return env
}

// selfExecutable is the test binary's bytes and SHA-256, read once.
var selfExecutable = sync.OnceValues(func() ([]byte, error) {
	path, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return os.ReadFile(path)
})

func selfSHA256(t *testing.T) (string, []byte) {
	t.Helper()
	data, err := selfExecutable()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), data
}

// uploadSelf uploads the test binary to the GCS as drivers do, in chunks of 1 MiB. A
// GCS without ExecutableService yet (it is written separately) gets the binary put in
// the raylet's cache instead, so the worker tests still run.
func uploadSelf(t *testing.T, gcsAddress, cacheDir string) (sha string, uploaded bool) {
	t.Helper()
	sum, data := selfSHA256(t)
	conn, err := rpcutil.Dial(gcsAddress, rpcutil.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = uploadExecutable(ctx, pb.NewExecutableServiceClient(conn), sum, data)
	if status.Code(err) == codes.Unimplemented {
		t.Logf("the GCS does not serve ExecutableService yet; seeding the executable cache instead")
		if err := os.MkdirAll(cacheDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cacheDir+"/"+sum, data, 0o755); err != nil {
			t.Fatal(err)
		}
		return sum, false
	}
	if err != nil {
		t.Fatalf("upload the test binary: %v", err)
	}
	return sum, true
}

func uploadExecutable(ctx context.Context, client pb.ExecutableServiceClient, sum string, data []byte) error {
	stream, err := client.UploadExecutable(ctx)
	if err != nil {
		return err
	}
	const chunkBytes = 1 << 20
	for offset := 0; offset == 0 || offset < len(data); offset += chunkBytes {
		chunk := &pb.ExecutableChunk{Data: data[offset:min(offset+chunkBytes, len(data))]}
		if offset == 0 {
			chunk.Sha256, chunk.Size = sum, int64(len(data))
		}
		if err := stream.Send(chunk); errors.Is(err, io.EOF) {
			break // the server ended the stream: CloseAndRecv has its status
		} else if err != nil {
			return err
		}
	}
	_, err = stream.CloseAndRecv()
	return err
}

// workerHarness is a real GCS and a real raylet whose workers run the test binary.
type workerHarness struct {
	gcs    *gcs.Server
	raylet *Raylet
	client pb.NodeManagerServiceClient
	sha    string
	logDir string
	// uploaded is false while the GCS lacks ExecutableService (the cache was seeded).
	uploaded bool
}

// startWorkerHarness starts a GCS and a raylet (configured by configure, if given) and
// uploads the test binary. Everything stops at cleanup.
func startWorkerHarness(t *testing.T, configure func(*Config)) *workerHarness {
	t.Helper()
	g := startTestGCS(t)
	cfg := DefaultConfig()
	cfg.GCSAddress = g.Address()
	cfg.HeartbeatInterval = 50 * time.Millisecond
	cfg.Resources = map[string]float64{"CPU": 4}
	cfg.ExecutableCacheDir = t.TempDir()
	cfg.WorkerLogDir = t.TempDir()
	if configure != nil {
		configure(&cfg)
	}
	h := &workerHarness{gcs: g, logDir: cfg.WorkerLogDir}
	h.sha, h.uploaded = uploadSelf(t, g.Address(), cfg.ExecutableCacheDir)
	var err error
	if h.raylet, err = Start(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.raylet.Stop)
	conn, err := rpcutil.Dial(h.raylet.Address(), rpcutil.DialOptions{Epoch: g.Epoch})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	h.client = pb.NewNodeManagerServiceClient(conn)
	return h
}

// lease requests a worker for job "job-1" unless the request names another job.
func (h *workerHarness) lease(t *testing.T, req *pb.RequestWorkerLeaseRequest) (*pb.RequestWorkerLeaseReply, error) {
	t.Helper()
	if req.JobId == "" {
		req.JobId = "job-1"
	}
	req.ExecutableSha256 = h.sha
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return h.client.RequestWorkerLease(ctx, req)
}

func (h *workerHarness) mustLease(t *testing.T, req *pb.RequestWorkerLeaseRequest) *pb.WorkerInfo {
	t.Helper()
	reply, err := h.lease(t, req)
	if err != nil {
		t.Fatalf("lease %v: %v", req.Resources, err)
	}
	return reply.Worker
}

func (h *workerHarness) workers(t *testing.T) []*pb.WorkerInfo {
	t.Helper()
	reply, err := h.client.GetWorkers(context.Background(), &pb.GetWorkersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return reply.Workers
}

func (h *workerHarness) available(name string) float64 {
	return h.raylet.Node().ResourcesAvailable[name]
}

// eventually polls cond every 10 ms until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 20*time.Second, 10*time.Millisecond, what, func() error {
		if cond() {
			return nil
		}
		return errors.New("not yet")
	})
}
