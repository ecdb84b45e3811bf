package raylet

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// gcsExecutables is the GCS's ExecutableService, over the raylet's GCS connection.
type gcsExecutables struct {
	client pb.ExecutableServiceClient
}

var _ executableSource = gcsExecutables{}

func (g gcsExecutables) fetch(ctx context.Context, sum string, w io.Writer) (int64, error) {
	stream, err := g.client.DownloadExecutable(ctx, &pb.DownloadExecutableRequest{Sha256: sum})
	if err != nil {
		return 0, fromGCS(err)
	}
	return readChunks(stream, sum, w)
}

// fromGCS puts the GCS's refusal of a download in the cache's terms, keeping its
// message: NotFound is ErrExecutableNotUploaded, DataLoss ErrExecutableCorrupt and
// Internal ErrInternal. Anything else (the GCS unreachable) stays as it is, and the
// cache reports it as ErrExecutableUnavailable.
func fromGCS(err error) error {
	switch s, _ := status.FromError(err); s.Code() {
	case codes.NotFound:
		return refusef(ErrExecutableNotUploaded, "%s", s.Message())
	case codes.DataLoss:
		return refusef(ErrExecutableCorrupt, "%s", s.Message())
	case codes.Internal:
		return refusef(ErrInternal, "%s", s.Message())
	}
	return err
}

// readChunks copies a download stream to w. The first chunk names the hash and the size;
// a stream longer than announced is cut off at once rather than filling the disk.
func readChunks(stream grpc.ServerStreamingClient[pb.ExecutableChunk], sum string, w io.Writer) (int64, error) {
	size, written := int64(-1), int64(0)
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			if size < 0 {
				return 0, refusef(ErrExecutableCorrupt, "executable %s: the GCS sent no chunk", sum)
			}
			return size, nil
		}
		if err != nil {
			return 0, fromGCS(err)
		}
		if size < 0 {
			if chunk.Sha256 != sum {
				return 0, refusef(ErrExecutableCorrupt, "executable %s: the GCS sent executable %q", sum, chunk.Sha256)
			}
			size = chunk.Size
		}
		if written += int64(len(chunk.Data)); written > size {
			return 0, refusef(ErrExecutableCorrupt, "executable %s: the GCS sent more than the %d bytes it announced", sum, size)
		}
		if _, err := w.Write(chunk.Data); err != nil {
			return 0, err
		}
	}
}
