package rpcutil

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/internal/testutil/tlscerts"
)

// echoEpochServer answers every call with the GCS epoch the request carried ("none"
// without one), so tests see what the client interceptors sent.
type echoEpochServer struct {
	testpb.UnimplementedTestServiceServer
}

func epochText(ctx context.Context) string {
	if epoch, ok := EpochFromIncoming(ctx); ok {
		return strconv.FormatInt(epoch, 10)
	}
	return "none"
}

func (echoEpochServer) UnaryCall(ctx context.Context, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return &testpb.SimpleResponse{Payload: &testpb.Payload{Body: []byte(epochText(ctx))}}, nil
}

func (echoEpochServer) StreamingOutputCall(_ *testpb.StreamingOutputCallRequest, stream grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error {
	for range 2 {
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: []byte(epochText(stream.Context()))}}); err != nil {
			return err
		}
	}
	return nil
}

func (echoEpochServer) StreamingInputCall(stream grpc.ClientStreamingServer[testpb.StreamingInputCallRequest, testpb.StreamingInputCallResponse]) error {
	total := 0
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return stream.SendAndClose(&testpb.StreamingInputCallResponse{AggregatedPayloadSize: int32(total)})
		}
		if err != nil {
			return err
		}
		total += len(req.GetPayload().GetBody())
	}
}

func startEchoServer(t *testing.T, version uint32) string {
	t.Helper()
	return startEchoServerWithToken(t, version, "")
}

func startEchoServerWithToken(t *testing.T, version uint32, token string) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveEcho(t, lis, version, token)
	return lis.Addr().String()
}

// serveEcho serves echoEpochServer on lis, with ServerOptions(version, token), until the
// test ends.
func serveEcho(t *testing.T, lis net.Listener, version uint32, token string) {
	t.Helper()
	serverOptions, err := ServerOptions(version, token)
	if err != nil {
		t.Fatal(err)
	}
	server := grpc.NewServer(serverOptions...)
	testpb.RegisterTestServiceServer(server, echoEpochServer{})
	go func() { _ = server.Serve(lis) }()
	t.Cleanup(server.Stop)
}

func testClient(t *testing.T, addr string, opts DialOptions) testpb.TestServiceClient {
	t.Helper()
	conn, err := Dial(addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return testpb.NewTestServiceClient(conn)
}

func callContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// readStream returns the bodies of a server stream, or its error.
func readStream(ctx context.Context, client testpb.TestServiceClient) ([]string, error) {
	stream, err := client.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{})
	if err != nil {
		return nil, err
	}
	var bodies []string
	for {
		reply, err := stream.Recv()
		if err == io.EOF {
			return bodies, nil
		}
		if err != nil {
			return bodies, err
		}
		bodies = append(bodies, string(reply.GetPayload().GetBody()))
	}
}

func TestStreamsCarryTheVersionAndTheEpoch(t *testing.T) {
	addr := startEchoServer(t, ProtocolVersion)
	ctx := callContext(t)
	cases := []struct {
		name string
		opts DialOptions
		want string
	}{
		{"without epoch", DialOptions{}, "none"},
		{"with epoch", DialOptions{Epoch: func() int64 { return 42 }}, "42"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := testClient(t, addr, tc.opts)
			bodies, err := readStream(ctx, client)
			if err != nil || len(bodies) != 2 || bodies[0] != tc.want {
				t.Fatalf("server stream: %q, %v; want two replies %q", bodies, err, tc.want)
			}
			unary, err := client.UnaryCall(ctx, &testpb.SimpleRequest{})
			if err != nil || string(unary.GetPayload().GetBody()) != tc.want {
				t.Fatalf("unary call: %v, %v; want %q", unary, err, tc.want)
			}
			upload, err := client.StreamingInputCall(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if err := upload.Send(&testpb.StreamingInputCallRequest{Payload: &testpb.Payload{Body: []byte("abcd")}}); err != nil {
					t.Fatal(err)
				}
			}
			reply, err := upload.CloseAndRecv()
			if err != nil || reply.AggregatedPayloadSize != 12 {
				t.Fatalf("client stream: %v, %v; want 12 bytes counted", reply, err)
			}
		})
	}
}

func TestStreamVersionMismatchNamesBothVersions(t *testing.T) {
	ctx := callContext(t)
	cases := []struct {
		name                  string
		server, client        uint32
		wantClient, wantServe string
	}{
		{"client newer", ProtocolVersion, ProtocolVersion + 1, strconv.Itoa(int(ProtocolVersion + 1)), strconv.Itoa(int(ProtocolVersion))},
		{"server newer", ProtocolVersion + 1, ProtocolVersion, strconv.Itoa(int(ProtocolVersion)), strconv.Itoa(int(ProtocolVersion + 1))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := startEchoServer(t, tc.server)
			client := testClient(t, addr, DialOptions{ProtocolVersion: tc.client})
			_, streamErr := readStream(ctx, client)
			upload, err := client.StreamingInputCall(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_ = upload.Send(&testpb.StreamingInputCallRequest{})
			_, uploadErr := upload.CloseAndRecv()
			for _, err := range []error{streamErr, uploadErr} {
				if status.Code(err) != codes.FailedPrecondition {
					t.Fatalf("mismatched stream: %v, want FailedPrecondition", err)
				}
				for _, want := range []string{"protocol version mismatch", "client speaks raygo protocol " + tc.wantClient, tc.wantServe, addr} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not contain %q", err, want)
					}
				}
			}
		})
	}
}

func TestStreamWithoutVersionIsRefused(t *testing.T) {
	addr := startEchoServer(t, ProtocolVersion)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = readStream(callContext(t), testpb.NewTestServiceClient(conn))
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "protocol version missing") {
		t.Fatalf("stream without the version header: %v, want FailedPrecondition naming the missing version", err)
	}
}

// A server with a token refuses unary and streaming calls without it, or with another,
// saying what to set; the right token passes.
func TestAServerWithATokenRefusesCallsWithoutIt(t *testing.T) {
	t.Setenv("HOME", t.TempDir()) // no ~/.raygo/auth_token
	t.Setenv("RAYGO_AUTH_TOKEN", "")
	addr := startEchoServerWithToken(t, ProtocolVersion, "s3cret")
	ctx := callContext(t)
	for _, tc := range []struct {
		name, token string
		ok          bool
	}{{"no token", "", false}, {"another token", "guess", false}, {"the token", "s3cret", true}} {
		client := testClient(t, addr, DialOptions{Token: tc.token})
		_, unaryErr := client.UnaryCall(ctx, &testpb.SimpleRequest{})
		_, streamErr := readStream(ctx, client)
		for what, err := range map[string]error{"unary": unaryErr, "stream": streamErr} {
			switch {
			case tc.ok && err != nil:
				t.Errorf("%s, %s call: %v", tc.name, what, err)
			case !tc.ok && (status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "RAYGO_AUTH_TOKEN") || !strings.Contains(err.Error(), addr)):
				t.Errorf("%s, %s call: %v, want Unauthenticated naming RAYGO_AUTH_TOKEN and the address", tc.name, what, err)
			}
		}
	}
	// Without an explicit token, a client takes the one the environment gives.
	t.Setenv("RAYGO_AUTH_TOKEN", "s3cret")
	if _, err := testClient(t, addr, DialOptions{}).UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
		t.Fatalf("token from RAYGO_AUTH_TOKEN: %v", err)
	}
}

// With RAYGO_USE_TLS=1 servers speak mutual TLS: a client with the CA-signed certificate
// is served; a plaintext client, and a TLS client without a certificate, are refused.
func TestWithTLSPlaintextAndUncertifiedClientsAreRefused(t *testing.T) {
	files, err := tlscerts.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range files.Env() {
		name, value, _ := strings.Cut(kv, "=")
		t.Setenv(name, value)
	}
	addr := startEchoServer(t, ProtocolVersion)
	ctx := callContext(t)
	if _, err := testClient(t, addr, DialOptions{}).UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
		t.Fatalf("a TLS client with the certificate: %v", err)
	}
	plain, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := testpb.NewTestServiceClient(plain).UnaryCall(short, &testpb.SimpleRequest{}); err == nil {
		t.Fatal("a plaintext client was served")
	}
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(files.CA)
	pool.AppendCertsFromPEM(pem)
	anonymous, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))
	if err != nil {
		t.Fatal(err)
	}
	defer anonymous.Close()
	short2, cancel2 := context.WithTimeout(ctx, 2*time.Second)
	defer cancel2()
	if _, err := testpb.NewTestServiceClient(anonymous).UnaryCall(short2, &testpb.SimpleRequest{}); err == nil {
		t.Fatal("a TLS client without a certificate was served")
	}
	t.Setenv(EnvTLSCACert, "")
	if _, err := Dial(addr, DialOptions{}); err == nil || !strings.Contains(err.Error(), EnvTLSCACert) {
		t.Fatalf("TLS on without a CA: %v, want an error naming %s", err, EnvTLSCACert)
	}
}

// recordingListener keeps what every accepted connection reads (the client's frames,
// after its preface) and writes (the server's).
type recordingListener struct {
	net.Listener
	mu            sync.Mutex
	read, written bytes.Buffer
}

type recordingConn struct {
	net.Conn
	l *recordingListener
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return recordingConn{Conn: c, l: l}, nil
}

func (c recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.l.mu.Lock()
	c.l.read.Write(p[:n])
	c.l.mu.Unlock()
	return n, err
}

func (c recordingConn) Write(p []byte) (int, error) {
	c.l.mu.Lock()
	c.l.written.Write(p)
	c.l.mu.Unlock()
	return c.Conn.Write(p)
}

// http2Pings counts the PING frames (not their acknowledgements) in a stream of HTTP/2
// frames, and fails on a stream that is not one.
func http2Pings(t *testing.T, frames []byte) (pings int) {
	t.Helper()
	const header, typePing, flagAck = 9, 0x6, 0x1
	for len(frames) > 0 {
		if len(frames) < header {
			t.Fatalf("%d bytes left are not an HTTP/2 frame header", len(frames))
		}
		length := int(frames[0])<<16 | int(frames[1])<<8 | int(frames[2])
		if frames[3] == typePing && frames[4]&flagAck == 0 {
			pings++
		}
		if len(frames) < header+length {
			t.Fatalf("a frame of %d bytes is cut short at %d", length, len(frames)-header)
		}
		frames = frames[header+length:]
	}
	return pings
}

func TestCallsSendNoFlowControlPings(t *testing.T) {
	// gRPC's default probes the bandwidth with a PING after data arrives, on both sides
	// of every small call; the fixed windows send none (keepalive pings come after
	// KeepaliveTime idle, far longer than this test).
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	recording := &recordingListener{Listener: lis}
	serveEcho(t, recording, ProtocolVersion, "")
	client := testClient(t, lis.Addr().String(), DialOptions{})
	ctx := callContext(t)
	for range 20 {
		if _, err := client.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("small")}}); err != nil {
			t.Fatal(err)
		}
	}
	// A message larger than both windows still goes through, the windows refilled as it
	// is read.
	big := &testpb.SimpleRequest{Payload: &testpb.Payload{Body: make([]byte, 3*ConnWindowBytes/2)}}
	if _, err := client.UnaryCall(ctx, big); err != nil {
		t.Fatalf("a %d-byte call: %v", len(big.Payload.Body), err)
	}
	time.Sleep(100 * time.Millisecond) // the client's answer to the last reply, if any
	recording.mu.Lock()
	defer recording.mu.Unlock()
	const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	read := recording.read.Bytes()
	if !bytes.HasPrefix(read, []byte(preface)) {
		t.Fatalf("the client did not open with the HTTP/2 preface: %q", read[:min(len(read), len(preface))])
	}
	if n := http2Pings(t, read[len(preface):]); n != 0 {
		t.Errorf("the client sent %d PING frames over 21 calls, want 0", n)
	}
	if n := http2Pings(t, recording.written.Bytes()); n != 0 {
		t.Errorf("the server sent %d PING frames over 21 calls, want 0", n)
	}
}
