package sdk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// executableChunkBytes is the size of one upload chunk (the GCS accepts up to 1 MiB).
const executableChunkBytes = 1 << 20

// uploadExecutable makes the GCS hold this program's executable, as Ray uploads a
// job's working_dir: raylets fetch it by hash to start workers on any node, and
// detached actors keep running after the driver (and a `go run` temporary binary) is
// gone. An executable the GCS already holds is not sent again.
func (c *Client) uploadExecutable(ctx context.Context) (string, error) {
	self, err := hashExecutable()
	if err != nil {
		return "", err
	}
	sum, size := self.sha256, self.size
	has, err := c.executables.HasExecutable(ctx, &pb.HasExecutableRequest{Sha256: sum})
	if err != nil {
		return "", c.wrap("upload executable", err)
	}
	if has.Found {
		return sum, nil
	}
	f, err := os.Open(self.path)
	if err != nil {
		return "", fmt.Errorf("open this program's executable: %w", err)
	}
	defer f.Close()
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
			return "", fmt.Errorf("read %s: %w", self.path, readErr)
		}
	}
	if _, err := stream.CloseAndRecv(); err != nil {
		return "", c.wrap("upload executable", err)
	}
	return sum, nil
}

type executableHash struct {
	path, sha256 string
	size         int64
}

var (
	hashOnce   sync.Once
	selfHash   executableHash
	selfHashed error
)

// hashExecutable hashes this program's executable once per process: every Connect
// of the process uploads the same file.
func hashExecutable() (executableHash, error) {
	hashOnce.Do(func() {
		path, err := os.Executable()
		if err != nil {
			selfHashed = fmt.Errorf("find this program's executable: %w", err)
			return
		}
		f, err := os.Open(path)
		if err != nil {
			selfHashed = fmt.Errorf("open this program's executable: %w", err)
			return
		}
		defer f.Close()
		hash := sha256.New()
		size, err := io.Copy(hash, f)
		if err != nil {
			selfHashed = fmt.Errorf("read %s: %w", path, err)
			return
		}
		selfHash = executableHash{path: path, sha256: hex.EncodeToString(hash.Sum(nil)), size: size}
	})
	return selfHash, selfHashed
}
