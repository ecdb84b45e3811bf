package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/testutil/redisserver"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/tests/harness"
)

// Redis restarted without its append-only file comes back empty. The GCS must not go on
// (or restart) as if its tables were whole: its next write fails, it stops saying why,
// and the GCS its supervisor restarts refuses the empty Redis (the store's identity is
// gone) instead of serving an empty cluster.
func TestGCSStopsWhenRedisComesBackEmpty(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	redis := redisserver.StartWithOptions(t, redisserver.Options{Dir: dir})
	c := harness.StartHead(t, "--store", "redis", "--redis-address", redis.Addr, "--redis-namespace", "lost")
	gcs := harness.Dial(t, c.GCSAddress)
	ctx := context.Background()
	if _, err := gcs.KV.KVPut(ctx, &pb.KVPutRequest{Namespace: "ns", Key: []byte("k"), Value: []byte("v"), Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	redis.Kill()
	if err := os.RemoveAll(filepath.Join(dir, "appendonlydir")); err != nil {
		t.Fatal(err)
	}
	redis.Restart()

	// The next write is refused, and the GCS says why in its log.
	harness.Eventually(t, 30*time.Second, "a write refused after Redis lost the store", func() error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := gcs.KV.KVPut(ctx, &pb.KVPutRequest{Namespace: "ns", Key: []byte("k2"), Value: []byte("v"), Overwrite: true})
		if err == nil {
			return errString("a write was acknowledged by a GCS whose Redis came back empty")
		}
		return nil
	})
	harness.Eventually(t, 30*time.Second, "the GCS's logs name the loss, and a restarted GCS refuses the empty Redis", func() error {
		var text strings.Builder
		logs, _ := filepath.Glob(filepath.Join(c.Head.LogDir, "*"))
		for _, name := range logs {
			b, _ := os.ReadFile(name)
			text.Write(b)
		}
		if !strings.Contains(text.String(), "lost acknowledged writes") || !strings.Contains(text.String(), "this cluster used") {
			return errString("the logs do not say it yet: " + strings.Join(logs, ", "))
		}
		return nil
	})
	// Nothing serves the empty store: no write is acknowledged.
	ctx2, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := gcs.KV.KVPut(ctx2, &pb.KVPutRequest{Namespace: "ns", Key: []byte("k3"), Value: []byte("v"), Overwrite: true}); err == nil {
		t.Fatal("a GCS acknowledged a write on the emptied Redis")
	}
}

type errString string

func (e errString) Error() string { return string(e) }
