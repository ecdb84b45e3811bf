//lint:file-ignore SA1019 the test writes actor rows as they were stored before the enum

package gcs

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/gcs/store"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// Actor rows stored while SchedulingStrategy.kind was a string load with that kind.
func TestActorRowsWithTheStringKindLoad(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	kinds := map[string]pb.SchedulingStrategyKind{"aa": strategySpread, "bb": strategyNodeAffinity, "cc": strategyDefault, "dd": strategyDefault}
	legacy := map[string]string{"aa": "SPREAD", "bb": "NODE_AFFINITY", "cc": "DEFAULT", "dd": ""}
	for id, kind := range legacy {
		strategy := &pb.SchedulingStrategy{LegacyKind: kind}
		if kind == "NODE_AFFINITY" {
			strategy.NodeId, strategy.Soft = "n1", true
		}
		row := &pb.ActorInfo{ActorId: id, JobId: "gone", ClassName: "Counter", Namespace: "team", IsDetached: true,
			State: pb.ActorState_ACTOR_PENDING_CREATION, BundleIndex: -1, SchedulingStrategy: strategy, ExecutableSha256: "00"}
		raw, err := proto.Marshal(row)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Put(ctx, store.TableActors, id, raw); err != nil {
			t.Fatal(err)
		}
	}
	s := startGCS(t, st)
	c := dialActors(t, s.Address())
	for id, want := range kinds {
		got := (actorFixture{c: c}).get(t, id).SchedulingStrategy
		if got.Kind != want || got.LegacyKind != "" {
			t.Errorf("actor %s (stored kind %q): kind %v, legacy %q; want %v", id, legacy[id], got.Kind, got.LegacyKind, want)
		}
	}
}
