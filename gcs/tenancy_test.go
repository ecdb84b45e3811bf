package gcs

import (
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/internal/auth"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

func TestAllowedByScope(t *testing.T) {
	admin, node := auth.Admin, auth.Scope{Kind: auth.ScopeNode}
	queueA, nsB := auth.Scope{Kind: auth.ScopeQueue, Name: "a"}, auth.Scope{Kind: auth.ScopeNamespace, Name: "b"}
	for _, tc := range []struct {
		method string
		ok     []auth.Scope
		denied []auth.Scope
	}{
		{"/raygo.v1.AuthService/IssueToken", []auth.Scope{admin}, []auth.Scope{node, queueA, nsB}},
		{"/raygo.v1.QueueService/ApplyQueues", []auth.Scope{admin}, []auth.Scope{node, queueA}},
		{"/raygo.v1.InternalKVService/KVDel", []auth.Scope{admin}, []auth.Scope{node, queueA}},
		{"/raygo.v1.InternalKVService/KVPut", []auth.Scope{admin, queueA, nsB}, []auth.Scope{node}}, // own functions only (checkFunctionKey)
		{"/raygo.v1.AuthService/AuthorizeLease", []auth.Scope{admin, node}, []auth.Scope{queueA, nsB}},
		{"/raygo.v1.NodeInfoService/RegisterNode", []auth.Scope{admin, node}, []auth.Scope{queueA, nsB}},
		{"/raygo.v1.AutoscalerStateService/DrainNode", []auth.Scope{admin, node}, []auth.Scope{queueA, nsB}},
		{"/raygo.v1.ExecutableService/DownloadExecutable", []auth.Scope{admin, node}, []auth.Scope{queueA}},
		{"/raygo.v1.PlacementGroupService/CreatePlacementGroup", []auth.Scope{admin, queueA, nsB}, []auth.Scope{node}},
		{"/raygo.v1.ActorInfoService/KillActor", []auth.Scope{admin, queueA, nsB}, []auth.Scope{node}},
		{"/raygo.v1.ActorInfoService/ChooseLeaseTargets", []auth.Scope{admin, queueA, nsB}, []auth.Scope{node}},
		{"/raygo.v1.ActorInfoService/ReturnLeaseCharge", []auth.Scope{admin, queueA, nsB}, []auth.Scope{node}},
		{"/raygo.v1.PlacementGroupService/GetAllPlacementGroup", []auth.Scope{admin, node, queueA, nsB}, nil},
		{"/raygo.v1.NoSuchService/New", []auth.Scope{admin}, []auth.Scope{node, queueA}},
	} {
		for _, scope := range tc.ok {
			if err := allowed(scope, tc.method); err != nil {
				t.Errorf("%s with %s: %v, want allowed", tc.method, scope, err)
			}
		}
		for _, scope := range tc.denied {
			if err := statusOf(allowed(scope, tc.method)); err == nil || !strings.Contains(err.Error(), "PermissionDenied") {
				t.Errorf("%s with %s: %v, want PermissionDenied", tc.method, scope, err)
			}
		}
	}
}

func TestTenantOwnsOnlyItsQueueOrNamespace(t *testing.T) {
	tn := &tenancy{queueOf: func(ns string) string {
		return map[string]string{"a": "qa", "b": "qb"}[ns]
	}}
	queueA, nsB := auth.Scope{Kind: auth.ScopeQueue, Name: "qa"}, auth.Scope{Kind: auth.ScopeNamespace, Name: "b"}
	for _, tc := range []struct {
		scope            auth.Scope
		namespace, queue string
		want             bool
	}{
		{queueA, "a", "", true},    // the namespace maps to its queue
		{queueA, "b", "", false},   // to another queue
		{queueA, "b", "qa", true},  // charged to its queue explicitly
		{queueA, "a", "qb", false}, // charged to another
		{nsB, "b", "qa", true},     // a namespace tenant goes by namespace only
		{nsB, "a", "", false},
		{auth.Admin, "a", "qb", true},
		{auth.Scope{Kind: auth.ScopeNode}, "a", "qa", false}, // a node token owns nothing
	} {
		if got := tn.owns(tc.scope, tc.namespace, tc.queue); got != tc.want {
			t.Errorf("%s owns (namespace %q, queue %q) = %v, want %v", tc.scope, tc.namespace, tc.queue, got, tc.want)
		}
	}
	for _, tc := range []struct {
		scope               auth.Scope
		req                 *pb.CreatePlacementGroupRequest
		wantErr             string // the field named, "" for none
		wantQueue, wantName string
	}{
		{queueA, &pb.CreatePlacementGroupRequest{Namespace: "a"}, "", "qa", "a"},
		{queueA, &pb.CreatePlacementGroupRequest{Namespace: "unmapped"}, "", "qa", "unmapped"},
		{queueA, &pb.CreatePlacementGroupRequest{Namespace: "b"}, "namespace", "", "b"},
		{queueA, &pb.CreatePlacementGroupRequest{Queue: "qb"}, "queue", "qb", ""},
		{nsB, &pb.CreatePlacementGroupRequest{}, "", "", "b"},
		{nsB, &pb.CreatePlacementGroupRequest{Namespace: "a"}, "namespace", "", "a"},
	} {
		err := tn.checkNewGroup(tc.scope, tc.req)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr+" ")) {
			t.Errorf("%s creates %v: %v, want error naming %q", tc.scope, tc.req, err, tc.wantErr)
		}
		if tc.wantErr == "" && (tc.req.Queue != tc.wantQueue || tc.req.Namespace != tc.wantName) {
			t.Errorf("%s creates: queue %q namespace %q, want %q %q", tc.scope, tc.req.Queue, tc.req.Namespace, tc.wantQueue, tc.wantName)
		}
	}
}

// A tenant reaches in the KV only its own jobs' Python functions.
func TestTenantReachesOnlyItsOwnJobsFunctions(t *testing.T) {
	tn := &tenancy{queueOf: func(string) string { return "" }, job: func(id string) *pb.JobInfo {
		return map[string]*pb.JobInfo{"0a000000": {JobId: "0a000000", Namespace: "a"}, "0b000000": {JobId: "0b000000", Namespace: "b"}}[id]
	}}
	nsA := auth.Scope{Kind: auth.ScopeNamespace, Name: "a"}
	for _, tc := range []struct {
		namespace, key, wantField string // wantField: the field the refusal names, "" for none
	}{
		{"fun", "RemoteFunction:0a000000:ab12", ""},
		{"fun", "RemoteFunction:0b000000:ab12", "key"},         // another tenant's job
		{"fun", "RemoteFunction:0c000000:ab12", "key"},         // an unknown job
		{"fun", "RemoteFunction:0a000000", "key"},              // no function hash
		{"fun", "ActorClass:0a000000:ab12", "key"},             // not a function key
		{"session", "RemoteFunction:0a000000:ab", "namespace"}, // another namespace of the KV
	} {
		err := statusOf(tn.checkFunctionKey(nsA, tc.namespace, tc.key))
		switch {
		case tc.wantField == "" && err != nil:
			t.Errorf("%s %s: %v, want allowed", tc.namespace, tc.key, err)
		case tc.wantField != "" && (err == nil || !strings.Contains(err.Error(), "PermissionDenied") || !strings.Contains(err.Error(), tc.wantField)):
			t.Errorf("%s %s: %v, want PermissionDenied naming %s", tc.namespace, tc.key, err, tc.wantField)
		}
	}
}
