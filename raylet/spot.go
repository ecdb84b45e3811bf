package raylet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// spotNotice is EC2's spot interruption notice
// (/latest/meta-data/spot/instance-action): what happens to the instance and when.
type spotNotice struct {
	Action string    `json:"action"`
	Time   time.Time `json:"time"`
}

// errNoNotice: the metadata has no interruption notice (404), the normal case.
var errNoNotice = errors.New("no spot interruption notice")

// fetchSpotNotice reads the notice from the instance metadata at base, with an IMDSv2
// session token when the endpoint gives one (IMDSv1 otherwise).
func fetchSpotNotice(ctx context.Context, client *http.Client, base string) (spotNotice, error) {
	base = strings.TrimRight(base, "/")
	token := ""
	if req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+"/latest/api/token", nil); err == nil {
		req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "300")
		if resp, err := client.Do(req); err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				token = strings.TrimSpace(string(body))
			}
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/latest/meta-data/spot/instance-action", nil)
	if err != nil {
		return spotNotice{}, err
	}
	if token != "" {
		req.Header.Set("X-aws-ec2-metadata-token", token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return spotNotice{}, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return spotNotice{}, errNoNotice
	default:
		return spotNotice{}, fmt.Errorf("instance metadata answered %s", resp.Status)
	}
	var notice spotNotice
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&notice); err != nil {
		return spotNotice{}, fmt.Errorf("spot interruption notice: %w", err)
	}
	if notice.Action == "" || notice.Time.IsZero() {
		return spotNotice{}, fmt.Errorf("spot interruption notice without action or time")
	}
	return notice, nil
}

// watchSpotInterruption polls the instance metadata for a spot interruption notice
// until the raylet stops. On one it drains this node with reason PREEMPTION and the
// notice's time as deadline, so the GCS moves its bundles now and the autoscaler asks
// for the replacement at once, not when the node dies; then it stops watching.
func (r *Raylet) watchSpotInterruption(gcs pb.AutoscalerStateServiceClient) {
	interval := r.cfg.SpotPollInterval
	if interval <= 0 {
		interval = 5 * time.Second
	}
	client := &http.Client{Timeout: 2 * time.Second}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	warned := false
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		notice, err := fetchSpotNotice(ctx, client, r.cfg.SpotMetadataURL)
		cancel()
		switch {
		case err == nil:
			r.log.Warn().Str("action", notice.Action).Time("deadline", notice.Time).Msg("spot interruption notice: draining this node")
			if r.drainForPreemption(gcs, notice) {
				return
			}
		case !errors.Is(err, errNoNotice) && !warned:
			r.log.Warn().Err(err).Str("url", r.cfg.SpotMetadataURL).Msg("cannot read the spot interruption notice; will keep trying")
			warned = true
		}
		select {
		case <-r.stop:
			return
		case <-ticker.C:
		}
	}
}

// drainForPreemption asks the GCS to drain this node for the notice; false when the
// call failed (the next poll tries again).
func (r *Raylet) drainForPreemption(gcs pb.AutoscalerStateServiceClient, notice spotNotice) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	reply, err := gcs.DrainNode(ctx, &pb.AutoscalerDrainNodeRequest{
		NodeId: r.cfg.NodeID, Reason: pb.DrainNodeReason_DRAIN_NODE_REASON_PREEMPTION,
		ReasonMessage: "spot interruption: " + notice.Action, DeadlineTimestampMs: notice.Time.UnixMilli(),
	})
	if err != nil {
		r.log.Warn().Err(err).Msg("the GCS did not take the preemption drain; retrying at the next poll")
		return false
	}
	if !reply.IsAccepted {
		r.log.Warn().Str("why", reply.RejectionReasonMessage).Msg("the GCS refused the preemption drain")
	}
	return true
}
