package gcs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"

	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/fielderr"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// executableChunkBytes is the largest chunk on the wire (both directions) and in the
// store: 1 MiB keeps every gRPC message and every store value small.
const executableChunkBytes = 1 << 20

// executableManifest is the value under "<sha256>" in store.TableExecutables. It is
// written in the same batch as the chunks, so an executable is visible whole or not at all.
type executableManifest struct {
	Size   int64 `json:"size"`
	Chunks int   `json:"chunks"`
}

func executableChunkKey(sha string, index int) string { return fmt.Sprintf("%s/%06d", sha, index) }

// executableService is the content-addressed store of worker executables (Ray's
// working_dir upload). The bytes live only in the store; memory holds when each stored
// executable was last used, for the collector of unused ones (executables_gc.go).
//
// Concurrency: sweeping is held for writing while a collection decides and deletes, and
// for reading by every call after which a caller relies on an executable staying stored
// (HasExecutable, CreateActor's check, an upload's write, a download's start). Those
// calls record a use while they hold it, so a collection either sees that use or has
// finished deleting before they read the store. lastUse is behind useMu, a leaf lock.
type executableService struct {
	pb.UnimplementedExecutableServiceServer
	store    store.Store
	maxBytes int64
	// grace is Config.ExecutableGracePeriod; now is the server clock.
	grace time.Duration
	now   func() time.Time
	// startTime stands for the last use of what was stored before this GCS started.
	startTime time.Time
	log       zerolog.Logger

	sweeping sync.RWMutex
	useMu    sync.Mutex
	// lastUse is when each stored executable was last used; one stored before this
	// GCS started and not used since has no entry (see startTime).
	lastUse map[string]time.Time
}

func newExecutableService(cfg Config, startTime time.Time, log zerolog.Logger) *executableService {
	return &executableService{
		store: cfg.Store, maxBytes: cfg.MaxExecutableBytes, grace: cfg.ExecutableGracePeriod,
		now: cfg.Now, startTime: startTime, log: log, lastUse: map[string]time.Time{},
	}
}

// used records a use of a stored executable now. Callers hold sweeping for reading.
func (x *executableService) used(sha string) {
	now := x.now()
	x.useMu.Lock()
	defer x.useMu.Unlock()
	if now.After(x.lastUse[sha]) {
		x.lastUse[sha] = now
	}
}

// checkSHA256 checks a hex SHA-256 as this service names executables.
func checkSHA256(field, sha string) error {
	if len(sha) != 2*sha256.Size {
		return errorf(fielderr.ErrInvalid, "%s: must be 64 lowercase hex characters, got %q", field, sha)
	}
	for _, c := range sha {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return errorf(fielderr.ErrInvalid, "%s: must be 64 lowercase hex characters, got %q", field, sha)
		}
	}
	return nil
}

// manifest returns an executable's manifest, or nil when the store lacks it.
func (x *executableService) manifest(ctx context.Context, sha string) (*executableManifest, error) {
	raw, found, err := x.store.Get(ctx, store.TableExecutables, sha)
	if err != nil {
		return nil, errorf(errUnavailable, "read executable %s: %v", sha, err)
	}
	if !found {
		return nil, nil
	}
	m := &executableManifest{}
	if err := json.Unmarshal(raw, m); err != nil {
		return nil, errorf(errDataLoss, "executable %s: corrupt manifest: %v", sha, err)
	}
	return m, nil
}

// has reports whether the executable is stored (the actor manager checks it), and
// counts as a use of it.
func (x *executableService) has(ctx context.Context, sha string) (bool, error) {
	x.sweeping.RLock()
	defer x.sweeping.RUnlock()
	m, err := x.manifest(ctx, sha)
	if m != nil {
		x.used(sha)
	}
	return m != nil, err
}

// HasExecutable implements pb.ExecutableServiceServer.
func (x *executableService) HasExecutable(ctx context.Context, req *pb.HasExecutableRequest) (*pb.HasExecutableReply, error) {
	if err := checkSHA256("sha256", req.Sha256); err != nil {
		return nil, err
	}
	found, err := x.has(ctx, req.Sha256)
	if err != nil {
		return nil, err
	}
	return &pb.HasExecutableReply{Found: found}, nil
}

// UploadExecutable implements pb.ExecutableServiceServer. The bytes are held in memory
// (at most MaxExecutableBytes) until they are checked, then written in one atomic batch.
func (x *executableService) UploadExecutable(stream grpc.ClientStreamingServer[pb.ExecutableChunk, pb.UploadExecutableReply]) error {
	first, err := stream.Recv()
	if err == io.EOF {
		return errorf(fielderr.ErrInvalid, "%s", "sha256: required in the first chunk (the stream was empty)")
	}
	if err != nil {
		return err
	}
	sha, size := first.Sha256, first.Size
	if err := checkSHA256("sha256", sha); err != nil {
		return err
	}
	if size <= 0 {
		return errorf(fielderr.ErrInvalid, "size: must be positive, got %d", size)
	}
	if size > x.maxBytes {
		return errorf(fielderr.ErrInvalid, "size: %d bytes is more than the limit of %d bytes (MaxExecutableBytes)", size, x.maxBytes)
	}

	// Re-chunk into exactly executableChunkBytes pieces, whatever sizes the client sent.
	chunks := make([][]byte, 0, (size+executableChunkBytes-1)/executableChunkBytes)
	hash := sha256.New()
	received := int64(0)
	add := func(index int, data []byte) error {
		if len(data) > executableChunkBytes {
			return errorf(fielderr.ErrInvalid, "data: chunk %d carries %d bytes, more than the %d-byte limit", index, len(data), executableChunkBytes)
		}
		received += int64(len(data))
		if received > size {
			return errorf(fielderr.ErrInvalid, "size: declared %d bytes, received at least %d", size, received)
		}
		hash.Write(data)
		for len(data) > 0 {
			if n := len(chunks); n == 0 || len(chunks[n-1]) == executableChunkBytes {
				chunks = append(chunks, make([]byte, 0, min(int64(executableChunkBytes), size-int64(n)*executableChunkBytes)))
			}
			last := &chunks[len(chunks)-1]
			take := min(executableChunkBytes-len(*last), len(data))
			*last = append(*last, data[:take]...)
			data = data[take:]
		}
		return nil
	}
	if err := add(0, first.Data); err != nil {
		return err
	}
	for index := 1; ; index++ {
		chunk, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if err := add(index, chunk.Data); err != nil {
			return err
		}
	}
	if received != size {
		return errorf(fielderr.ErrInvalid, "size: declared %d bytes, received %d", size, received)
	}
	if got := hex.EncodeToString(hash.Sum(nil)); got != sha {
		return errorf(fielderr.ErrInvalid, "sha256: declared %s, the bytes hash to %s", sha, got)
	}

	if err := x.write(stream.Context(), sha, size, chunks); err != nil {
		return err
	}
	return stream.SendAndClose(&pb.UploadExecutableReply{})
}

// write stores a checked executable in one atomic batch, unless it is stored already
// (content-addressed: it is whole), and counts as a use of it.
func (x *executableService) write(ctx context.Context, sha string, size int64, chunks [][]byte) error {
	x.sweeping.RLock()
	defer x.sweeping.RUnlock()
	if existing, err := x.manifest(ctx, sha); err != nil {
		return err
	} else if existing == nil {
		manifest, _ := json.Marshal(executableManifest{Size: size, Chunks: len(chunks)})
		ops := make([]store.Op, 0, len(chunks)+1)
		for i, data := range chunks {
			ops = append(ops, store.Op{Kind: store.OpPut, Table: store.TableExecutables, Key: executableChunkKey(sha, i), Value: data})
		}
		ops = append(ops, store.Op{Kind: store.OpPut, Table: store.TableExecutables, Key: sha, Value: manifest})
		if err := x.store.Apply(ctx, ops); err != nil {
			return errorf(errUnavailable, "store executable %s: %v", sha, err)
		}
	}
	x.used(sha)
	return nil
}

// DownloadExecutable implements pb.ExecutableServiceServer.
func (x *executableService) DownloadExecutable(req *pb.DownloadExecutableRequest, stream grpc.ServerStreamingServer[pb.ExecutableChunk]) error {
	if err := checkSHA256("sha256", req.Sha256); err != nil {
		return err
	}
	ctx := stream.Context()
	// The use recorded here keeps the executable stored for the grace period while the
	// chunks stream, without holding sweeping.
	x.sweeping.RLock()
	m, err := x.manifest(ctx, req.Sha256)
	if m != nil {
		x.used(req.Sha256)
	}
	x.sweeping.RUnlock()
	if err != nil {
		return err
	}
	if m == nil {
		return errorf(errNotFound, "executable %s: not uploaded", req.Sha256)
	}
	for i := range m.Chunks {
		data, found, err := x.store.Get(ctx, store.TableExecutables, executableChunkKey(req.Sha256, i))
		if err != nil {
			return errorf(errUnavailable, "read executable %s chunk %d: %v", req.Sha256, i, err)
		}
		if !found {
			return errorf(errDataLoss, "executable %s: chunk %d of %d missing from the store", req.Sha256, i, m.Chunks)
		}
		chunk := &pb.ExecutableChunk{Data: data}
		if i == 0 {
			chunk.Sha256, chunk.Size = req.Sha256, m.Size
		}
		if err := stream.Send(chunk); err != nil {
			return err
		}
	}
	return nil
}
