package raylet

import (
	"time"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// heartbeatRequest is the report a raylet sends the GCS: its available resources (and
// MIG slot maps) at their version, and its gossip address.
func heartbeatRequest(nodeID string, report *pb.ResourceReport, gossipAddress string) *pb.ReportHeartbeatRequest {
	return &pb.ReportHeartbeatRequest{
		NodeId: nodeID, ResourcesAvailable: report.ResourcesAvailable, ResourcesVersion: report.Version,
		GossipAddress: gossipAddress, MigGpus: report.MigGpus,
	}
}

// keepAliveRequest is the report of a raylet on which nothing changed since the report
// at version the GCS acknowledged: no resources, the GCS keeps what it has.
func keepAliveRequest(nodeID string, version int64, gossipAddress string) *pb.ReportHeartbeatRequest {
	return &pb.ReportHeartbeatRequest{NodeId: nodeID, ResourcesVersion: version, GossipAddress: gossipAddress, Unchanged: true}
}

// IdleReporting is how a raylet on which nothing changes reports to the GCS: a
// keep-alive every Every. Benchmarks use it to stand in for thousands of idle raylets.
type IdleReporting struct {
	Every time.Duration
}

// IdleReports is the reporting of an idle raylet with cfg. (available, what its node
// offers, is what it registered with; an idle raylet does not send it again.)
func IdleReports(cfg Config, available map[string]float64) IdleReporting {
	return IdleReporting{Every: cfg.KeepAliveInterval}
}

// Request is the heartbeat the idle raylet of nodeID sends.
func (p IdleReporting) Request(nodeID string) *pb.ReportHeartbeatRequest {
	return keepAliveRequest(nodeID, 0, "")
}
