package gcs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

func executableClient(t *testing.T, addr string, version uint32) pb.ExecutableServiceClient {
	t.Helper()
	conn, err := rpcutil.Dial(addr, rpcutil.DialOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewExecutableServiceClient(conn)
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// testBytes is n bytes that differ from chunk to chunk, so a chunk out of order shows.
func testBytes(n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(i*7 + i/1000)
	}
	return out
}

// uploadChunks streams chunks (the first carries sha and size) and returns the result.
func uploadChunks(ctx context.Context, c pb.ExecutableServiceClient, sha string, size int64, chunks [][]byte) error {
	stream, err := c.UploadExecutable(ctx)
	if err != nil {
		return err
	}
	for i, data := range chunks {
		chunk := &pb.ExecutableChunk{Data: data}
		if i == 0 {
			chunk.Sha256, chunk.Size = sha, size
		}
		if err := stream.Send(chunk); err != nil {
			break // the server ended the stream: CloseAndRecv returns its status
		}
	}
	_, err = stream.CloseAndRecv()
	return err
}

// split cuts data into pieces of at most n bytes.
func split(data []byte, n int) [][]byte {
	var out [][]byte
	for len(data) > n {
		out = append(out, data[:n])
		data = data[n:]
	}
	return append(out, data)
}

func download(ctx context.Context, c pb.ExecutableServiceClient, sha string) ([]*pb.ExecutableChunk, error) {
	stream, err := c.DownloadExecutable(ctx, &pb.DownloadExecutableRequest{Sha256: sha})
	if err != nil {
		return nil, err
	}
	var chunks []*pb.ExecutableChunk
	for {
		chunk, err := stream.Recv()
		if err == io.EOF {
			return chunks, nil
		}
		if err != nil {
			return chunks, err
		}
		chunks = append(chunks, chunk)
	}
}

func TestExecutableRoundTripInSeveralChunks(t *testing.T) {
	st := store.NewMemory()
	s := startGCS(t, st)
	c := executableClient(t, s.Address(), 0)
	ctx := context.Background()
	data := testBytes(2*executableChunkBytes + executableChunkBytes/2)
	sha := sha256Hex(data)

	has, err := c.HasExecutable(ctx, &pb.HasExecutableRequest{Sha256: sha})
	if err != nil || has.Found {
		t.Fatalf("HasExecutable before the upload: %v, %v", has, err)
	}
	// The client's chunks (700 KiB) do not line up with the store's (1 MiB).
	if err := uploadChunks(ctx, c, sha, int64(len(data)), split(data, 700<<10)); err != nil {
		t.Fatalf("upload: %v", err)
	}
	has, err = c.HasExecutable(ctx, &pb.HasExecutableRequest{Sha256: sha})
	if err != nil || !has.Found {
		t.Fatalf("HasExecutable after the upload: %v, %v", has, err)
	}
	keys, err := st.Keys(ctx, store.TableExecutables, sha)
	if err != nil {
		t.Fatal(err)
	}
	wantKeys := []string{sha, sha + "/000000", sha + "/000001", sha + "/000002"}
	if strings.Join(keys, " ") != strings.Join(wantKeys, " ") {
		t.Errorf("stored keys %q, want %q", keys, wantKeys)
	}

	chunks, err := download(ctx, c, sha)
	if err != nil {
		t.Fatalf("download: %v", err)
	}
	if len(chunks) != 3 || chunks[0].Sha256 != sha || chunks[0].Size != int64(len(data)) {
		t.Fatalf("download: %d chunks, first sha %q size %d", len(chunks), chunks[0].GetSha256(), chunks[0].GetSize())
	}
	var got []byte
	for i, chunk := range chunks {
		if len(chunk.Data) > executableChunkBytes {
			t.Errorf("chunk %d has %d bytes, more than 1 MiB", i, len(chunk.Data))
		}
		got = append(got, chunk.Data...)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("downloaded bytes differ from the uploaded ones")
	}
	// Content-addressed: uploading the same executable again is fine.
	if err := uploadChunks(ctx, c, sha, int64(len(data)), split(data, executableChunkBytes)); err != nil {
		t.Fatalf("second upload of the same executable: %v", err)
	}
}

func TestExecutableUploadRejectsBadInputAndStoresNothing(t *testing.T) {
	st := store.NewMemory()
	s := startGCS(t, st, func(c *Config) { c.MaxExecutableBytes = 3 * executableChunkBytes })
	c := executableClient(t, s.Address(), 0)
	ctx := context.Background()
	data := testBytes(executableChunkBytes + 10)
	sha := sha256Hex(data)
	otherSHA := sha256Hex([]byte("something else"))
	size := int64(len(data))

	cases := []struct {
		name   string
		sha    string
		size   int64
		chunks [][]byte
		want   []string
	}{
		{"sha256 not hex", "xyz", size, split(data, 1<<20), []string{"sha256", "64 lowercase hex", `"xyz"`}},
		{"sha256 upper case", strings.ToUpper(sha), size, split(data, 1<<20), []string{"sha256", "lowercase"}},
		{"size zero", sha, 0, split(data, 1<<20), []string{"size", "positive", "0"}},
		{"size above the limit", sha, 3*executableChunkBytes + 1, split(data, 1<<20), []string{"size", "3145729", "3145728", "MaxExecutableBytes"}},
		{"fewer bytes than declared", sha, size + 5, split(data, 1<<20), []string{"size", "declared 1048591", "received 1048586"}},
		{"more bytes than declared", sha, size - 5, split(data, 1<<20), []string{"size", "declared 1048581", "received at least 1048586"}},
		{"hash mismatch", otherSHA, size, split(data, 1<<20), []string{"sha256", "declared " + otherSHA, "hash to " + sha}},
		{"chunk above 1 MiB", sha, size, [][]byte{data}, []string{"data", "chunk 0", "1048586", "1048576"}},
		{"empty stream", "", 0, nil, []string{"sha256", "required"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := uploadChunks(ctx, c, tc.sha, tc.size, tc.chunks)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("upload: %v, want InvalidArgument", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			rows, err := st.GetAll(ctx, store.TableExecutables)
			if err != nil || len(rows) != 0 {
				t.Fatalf("a refused upload left %d rows (%v)", len(rows), err)
			}
		})
	}
}

func TestExecutableLookupErrors(t *testing.T) {
	s := startGCS(t, store.NewMemory())
	c := executableClient(t, s.Address(), 0)
	ctx := context.Background()
	missing := sha256Hex([]byte("never uploaded"))
	_, err := download(ctx, c, missing)
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), missing) {
		t.Fatalf("download of a missing executable: %v, want NotFound naming it", err)
	}
	if _, err := download(ctx, c, "abc"); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("download with a malformed hash: %v", err)
	}
	if _, err := c.HasExecutable(ctx, &pb.HasExecutableRequest{Sha256: "abc"}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("HasExecutable with a malformed hash: %v", err)
	}
	// Streams check the protocol version as unary calls do.
	stale := executableClient(t, s.Address(), rpcutil.ProtocolVersion+1)
	_, err = download(ctx, stale, missing)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "protocol version mismatch") || !strings.Contains(err.Error(), s.Address()) {
		t.Fatalf("download with another protocol version: %v", err)
	}
}
