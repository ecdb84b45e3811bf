package sdk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// executableChunkBytes is the size of one upload chunk (the GCS accepts up to 1 MiB).
const executableChunkBytes = 1 << 20

// uploadExecutable makes the GCS hold this program's executable, as Ray uploads a
// job's working_dir: raylets fetch it by hash to start workers on any node, and
// detached actors keep running after the driver (and a `go run` temporary binary) is
// gone. An executable the GCS already holds is not sent again.
func (c *Client) uploadExecutable(ctx context.Context) (string, error) {
	path, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find this program's executable: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("open this program's executable: %w", err)
	}
	defer f.Close()
	hash := sha256.New()
	size, err := io.Copy(hash, f)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	sum := hex.EncodeToString(hash.Sum(nil))
	has, err := c.executables.HasExecutable(ctx, &pb.HasExecutableRequest{Sha256: sum})
	if err != nil {
		return "", c.wrap("upload executable", err)
	}
	if has.Found {
		return sum, nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	stream, err := c.executables.UploadExecutable(ctx)
	if err != nil {
		return "", c.wrap("upload executable", err)
	}
	buf := make([]byte, executableChunkBytes)
	first := true
	for {
		n, readErr := io.ReadFull(f, buf)
		if n > 0 || first {
			chunk := &pb.ExecutableChunk{Data: buf[:n]}
			if first {
				chunk.Sha256, chunk.Size = sum, size
				first = false
			}
			if err := stream.Send(chunk); err != nil {
				if _, closeErr := stream.CloseAndRecv(); closeErr != nil {
					err = closeErr
				}
				return "", c.wrap("upload executable", err)
			}
		}
		if errors.Is(readErr, io.EOF) || errors.Is(readErr, io.ErrUnexpectedEOF) {
			break
		}
		if readErr != nil {
			return "", fmt.Errorf("read %s: %w", path, readErr)
		}
	}
	if _, err := stream.CloseAndRecv(); err != nil {
		return "", c.wrap("upload executable", err)
	}
	return sum, nil
}
