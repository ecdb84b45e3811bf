package gcs

import (
	"context"
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/internal/auth"
	"github.com/raygo-dev/raygo/internal/stateapi"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// The head's dashboard, on the dashboard port beside /metrics: Ray's state API paths
// (/api/v0/...) in Ray's envelope, a few of raygo's own (/api/raygo/...), and a web page
// that polls them. The page's files are embedded: nothing is fetched at run time and
// nothing is built. README's "Dashboard" section lists the paths.

//go:embed dashboard_ui
var dashboardFiles embed.FS

// dashboardCallTimeout bounds one API answer: the tables are in memory, so this is a
// guard against a stuck lock, not a budget.
const dashboardCallTimeout = 5 * time.Second

// dashboardSources are what the dashboard reads: the GCS's own services, called in
// process as a gRPC client would call them, and the /metrics registry.
type dashboardSources struct {
	nodes      *nodeManager
	groups     *pgManager
	actors     *actorManager
	jobs       *jobManager
	queues     queueService
	autoscaler *autoscalerState
	metrics    prometheus.Gatherer
	// tenants hides from a tenant token what it may not see, as on gRPC.
	tenants *tenancy
}

// newDashboard is the dashboard's handler (every path but /metrics).
func newDashboard(src dashboardSources) http.Handler {
	ui, err := fs.Sub(dashboardFiles, "dashboard_ui")
	if err != nil {
		panic(err) // the embedded directory is part of the build
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v0/nodes", listHandler(func(ctx context.Context) ([]stateapi.Node, error) {
		reply, err := src.nodes.GetAllNodeInfo(ctx, &pb.GetAllNodeInfoRequest{})
		if err != nil {
			return nil, err
		}
		return mapRows(reply.Nodes, stateapi.FromNode), nil
	}))
	mux.HandleFunc("GET /api/v0/placement_groups", listHandler(func(ctx context.Context) ([]stateapi.PlacementGroup, error) {
		encoded, err := src.groups.GetAllPlacementGroup(ctx, &pb.GetAllPlacementGroupRequest{})
		if err != nil {
			return nil, err
		}
		// The reply carries its rows in wire form (GetAllPlacementGroup says why).
		wire, err := proto.Marshal(encoded)
		if err != nil {
			return nil, err
		}
		reply := &pb.GetAllPlacementGroupReply{}
		if err := proto.Unmarshal(wire, reply); err != nil {
			return nil, err
		}
		src.tenants.hide(ctx, reply)
		return mapRows(reply.PlacementGroups, stateapi.FromPlacementGroup), nil
	}))
	mux.HandleFunc("GET /api/v0/actors", listHandler(func(ctx context.Context) ([]stateapi.Actor, error) {
		reply, err := src.actors.GetAllActorInfo(ctx, &pb.GetAllActorInfoRequest{})
		if err != nil {
			return nil, err
		}
		src.tenants.hide(ctx, reply)
		return mapRows(reply.Actors, stateapi.FromActor), nil
	}))
	mux.HandleFunc("GET /api/v0/jobs", listHandler(func(ctx context.Context) ([]stateapi.Job, error) {
		reply, err := src.jobs.GetAllJobInfo(ctx, &pb.GetAllJobInfoRequest{})
		if err != nil {
			return nil, err
		}
		src.tenants.hide(ctx, reply)
		return mapRows(reply.Jobs, stateapi.FromJob), nil
	}))
	mux.HandleFunc("GET /api/v0/cluster_status", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), dashboardCallTimeout)
		defer cancel()
		if err := allowed(auth.ScopeFrom(ctx), "/raygo.v1.AutoscalerStateService/GetClusterStatus"); err != nil {
			writeReply(w, http.StatusForbidden, stateapi.Refused(err.Error()))
			return
		}
		reply, err := src.autoscaler.GetClusterStatus(ctx, &pb.GetClusterStatusRequest{})
		if err != nil {
			writeReply(w, http.StatusInternalServerError, stateapi.Refused(err.Error()))
			return
		}
		raw, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(reply)
		if err != nil {
			writeReply(w, http.StatusInternalServerError, stateapi.Refused(err.Error()))
			return
		}
		writeReply(w, http.StatusOK, stateapi.OK(json.RawMessage(raw)))
	})
	mux.HandleFunc("GET /api/raygo/queues", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), dashboardCallTimeout)
		defer cancel()
		reply, err := src.queues.ListQueues(ctx, &pb.ListQueuesRequest{})
		if err != nil {
			writeReply(w, http.StatusInternalServerError, stateapi.Refused(err.Error()))
			return
		}
		writeReply(w, http.StatusOK, stateapi.OK(map[string]any{"enabled": reply.Enabled, "queues": mapRows(reply.Queues, stateapi.FromQueue)}))
	})
	mux.HandleFunc("GET /api/raygo/decision_latency", func(w http.ResponseWriter, r *http.Request) {
		histogram, err := decisionLatency(src.metrics)
		if err != nil {
			writeReply(w, http.StatusInternalServerError, stateapi.Refused(err.Error()))
			return
		}
		writeReply(w, http.StatusOK, stateapi.OK(histogram))
	})
	page := func(w http.ResponseWriter, r *http.Request) { http.ServeFileFS(w, r, ui, "index.html") }
	mux.HandleFunc("GET /{$}", page)
	mux.HandleFunc("GET /dashboard/{$}", page)
	mux.Handle("GET /dashboard/", http.StripPrefix("/dashboard/", http.FileServerFS(ui)))
	return mux
}

// listHandler answers one of Ray's list paths: the rows fetch returns, filtered and
// limited as the query says, in Ray's envelope (400 with msg for a bad query, 500 when
// the rows cannot be read).
func listHandler[T any](fetch func(context.Context) ([]T, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		options, err := stateapi.ParseListOptions(r.URL.Query())
		if err != nil {
			writeReply(w, http.StatusBadRequest, stateapi.Refused(err.Error()))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), dashboardCallTimeout)
		defer cancel()
		rows, err := fetch(ctx)
		if err != nil {
			writeReply(w, http.StatusInternalServerError, stateapi.Refused(err.Error()))
			return
		}
		listed, err := stateapi.List(rows, options)
		if err != nil {
			writeReply(w, http.StatusBadRequest, stateapi.Refused(err.Error()))
			return
		}
		writeReply(w, http.StatusOK, stateapi.OK(listed))
	}
}

func mapRows[P any, T any](in []P, row func(P) T) []T {
	out := make([]T, len(in))
	for i, p := range in {
		out[i] = row(p)
	}
	return out
}

func writeReply(w http.ResponseWriter, code int, reply stateapi.Reply) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(reply)
}

// latencyHistogram is raygo_scheduling_decision_seconds as JSON: decisions counted
// under each upper bound (cumulative, as Prometheus'), their number and total seconds.
type latencyHistogram struct {
	Count   uint64          `json:"count"`
	Sum     float64         `json:"sum_seconds"`
	Buckets []latencyBucket `json:"buckets"`
}

type latencyBucket struct {
	LE    float64 `json:"le_seconds"`
	Count uint64  `json:"cumulative_count"`
}

// decisionLatency reads the decision-latency histogram from the registry /metrics
// serves, so the page and a scrape show the same figures.
func decisionLatency(registry prometheus.Gatherer) (latencyHistogram, error) {
	out := latencyHistogram{Buckets: []latencyBucket{}}
	families, err := registry.Gather()
	if err != nil {
		return out, err
	}
	for _, family := range families {
		if family.GetName() != "raygo_scheduling_decision_seconds" || len(family.Metric) == 0 {
			continue
		}
		h := family.Metric[0].GetHistogram()
		out.Count, out.Sum = h.GetSampleCount(), h.GetSampleSum()
		for _, b := range h.Bucket {
			out.Buckets = append(out.Buckets, latencyBucket{LE: b.GetUpperBound(), Count: b.GetCumulativeCount()})
		}
	}
	return out, nil
}
