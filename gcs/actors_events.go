package gcs

import pb "github.com/raygo-dev/raygo/protos/raygopb"

// The actor manager's side of the subscriptions in events.go: each of these events may
// let a waiting actor start, so it retries its queue at once.

func (m *actorManager) onNodeRegistered(*pb.NodeInfo)    { m.retryAllNow() }
func (m *actorManager) onResourcesReported(bool)         { m.retryAllNow() }
func (m *actorManager) onPlacementGroupCreated(_ string) { m.retryAllNow() }

var (
	_ nodeListener  = (*actorManager)(nil)
	_ jobListener   = (*actorManager)(nil)
	_ groupListener = (*actorManager)(nil)

	_ functionHolders = (*actorManager)(nil)
)
