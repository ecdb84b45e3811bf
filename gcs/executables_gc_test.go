package gcs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/testutil/logbuf"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

func TestExecutablesToDelete(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	grace := 10 * time.Minute
	cases := []struct {
		name       string
		lastUse    map[string]time.Time
		referenced []string
		want       []string
	}{
		{"nothing stored", nil, []string{"a"}, nil},
		{"used within the grace", map[string]time.Time{"a": now.Add(-grace + time.Second)}, nil, nil},
		{"unused for exactly the grace", map[string]time.Time{"a": now.Add(-grace)}, nil, []string{"a"}},
		{"unused for longer", map[string]time.Time{"a": now.Add(-time.Hour)}, nil, []string{"a"}},
		{"referenced, however old its last use", map[string]time.Time{"a": now.Add(-time.Hour)}, []string{"a"}, nil},
		{"a reference to something not stored changes nothing", map[string]time.Time{"a": now.Add(-time.Hour)}, []string{"b"}, []string{"a"}},
		{"last use in the future (a clock step back)", map[string]time.Time{"a": now.Add(time.Hour)}, nil, nil},
		{
			"mixed, sorted by hash",
			map[string]time.Time{"d": now.Add(-time.Hour), "c": now, "b": now.Add(-2 * grace), "a": now.Add(-time.Hour)},
			[]string{"a"},
			[]string{"b", "d"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			referenced := map[string]bool{}
			for _, sha := range tc.referenced {
				referenced[sha] = true
			}
			got := executablesToDelete(tc.lastUse, referenced, now, grace)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("executablesToDelete = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestExecutableRefsKeepTheLatestEnd(t *testing.T) {
	refs := newExecutableRefs()
	refs.add("", true, 0) // a job without an executable
	refs.add("a", false, 200)
	refs.add("a", false, 100)
	refs.add("b", true, 0)
	refs.add("b", false, 300)
	if len(refs.live) != 1 || !refs.live["b"] {
		t.Errorf("live = %v, want only b", refs.live)
	}
	if refs.endedMs["a"] != 200 || refs.endedMs["b"] != 300 || len(refs.endedMs) != 2 {
		t.Errorf("endedMs = %v, want a:200 b:300", refs.endedMs)
	}
}

// gcFixture is a GCS on a memory store with a fake clock, and an executable of
// several chunks to upload.
type gcFixture struct {
	s     *Server
	st    store.Store
	clock *fakeClock
	c     actorTestClients
	logs  *logbuf.Buffer
	data  []byte
	sha   string
}

func newGCFixture(t *testing.T, st store.Store, clock *fakeClock) gcFixture {
	t.Helper()
	logs := &logbuf.Buffer{}
	s := startGCS(t, st, func(c *Config) {
		c.Now = clock.Now
		c.JobLeaseTimeout = 24 * time.Hour // the fake clock jumps; drivers here do not renew
		c.Logger = zerolog.New(logs)
	})
	data := testBytes(2*executableChunkBytes + 10)
	return gcFixture{s: s, st: st, clock: clock, c: dialActors(t, s.Address()), logs: logs, data: data, sha: sha256Hex(data)}
}

// connect does what the SDK's Connect does: AddJob naming the executable, then
// HasExecutable and an upload when the GCS lacks it. It returns the job id.
func (f gcFixture) connect(t *testing.T, data []byte) string {
	t.Helper()
	ctx := context.Background()
	sha := sha256Hex(data)
	job, err := f.c.jobs.AddJob(ctx, &pb.AddJobRequest{DriverPid: 1, ExecutableSha256: sha})
	if err != nil {
		t.Fatal(err)
	}
	if job.Job.ExecutableSha256 != sha {
		t.Fatalf("AddJob returned executable_sha256 %q, want %q", job.Job.ExecutableSha256, sha)
	}
	has, err := f.c.exes.HasExecutable(ctx, &pb.HasExecutableRequest{Sha256: sha})
	if err != nil {
		t.Fatal(err)
	}
	if !has.Found {
		if err := uploadChunks(ctx, f.c.exes, sha, int64(len(data)), split(data, executableChunkBytes)); err != nil {
			t.Fatal(err)
		}
	}
	return job.Job.JobId
}

func (f gcFixture) finish(t *testing.T, jobID string) {
	t.Helper()
	if _, err := f.c.jobs.MarkJobFinished(context.Background(), &pb.MarkJobFinishedRequest{JobId: jobID}); err != nil {
		t.Fatal(err)
	}
}

// collect runs one collection and returns what it deleted.
func (f gcFixture) collect(t *testing.T) []string {
	t.Helper()
	deleted, err := f.s.collectUnusedExecutables(context.Background())
	if err != nil {
		t.Fatalf("collect: %v", err)
	}
	return deleted
}

// storedKeys reads the store directly: asking the GCS would count as a use.
func (f gcFixture) storedKeys(t *testing.T, sha string) []string {
	t.Helper()
	keys, err := f.st.Keys(context.Background(), store.TableExecutables, sha)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func TestUnusedExecutableIsDeletedAfterTheGraceAndCanBeUploadedAgain(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	f := newGCFixture(t, store.NewMemory(), clock)
	grace := f.s.cfg.ExecutableGracePeriod
	ctx := context.Background()

	jobID := f.connect(t, f.data)
	if got := f.s.jobs.get(jobID).ExecutableSha256; got != f.sha {
		t.Fatalf("the job table holds executable_sha256 %q, want %q", got, f.sha)
	}
	if keys := f.storedKeys(t, f.sha); len(keys) != 4 {
		t.Fatalf("stored keys %q, want the manifest and 3 chunks", keys)
	}
	// A live job keeps it however long ago it was uploaded.
	clock.Advance(3 * grace)
	if deleted := f.collect(t); len(deleted) != 0 {
		t.Fatalf("deleted %q while its job runs", deleted)
	}
	// The grace counts from the job's end.
	f.finish(t, jobID)
	clock.Advance(grace - time.Second)
	if deleted := f.collect(t); len(deleted) != 0 {
		t.Fatalf("deleted %q %s after its job ended, within the grace of %s", deleted, grace-time.Second, grace)
	}
	clock.Advance(time.Second)
	if deleted := f.collect(t); !slices.Equal(deleted, []string{f.sha}) {
		t.Fatalf("deleted %q once unused for the grace, want [%s]", deleted, f.sha)
	}
	if keys := f.storedKeys(t, f.sha); len(keys) != 0 {
		t.Fatalf("keys %q left after the deletion", keys)
	}
	if want := fmt.Sprintf(`"sha256":"%s","bytes":%d`, f.sha, len(f.data)); !f.logs.Has(want) {
		t.Errorf("no deletion log with %s", want)
	}

	// The next run of the driver uploads it again.
	f.connect(t, f.data)
	chunks, err := download(ctx, f.c.exes, f.sha)
	if err != nil || len(chunks) != 3 {
		t.Fatalf("download after the re-upload: %d chunks, %v", len(chunks), err)
	}
}

func TestExecutableUsesPostponeItsDeletion(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	f := newGCFixture(t, store.NewMemory(), clock)
	grace := f.s.cfg.ExecutableGracePeriod
	ctx := context.Background()

	// Uploaded without a job naming it (an old SDK, or a job not added yet).
	if err := uploadChunks(ctx, f.c.exes, f.sha, int64(len(f.data)), split(f.data, executableChunkBytes)); err != nil {
		t.Fatal(err)
	}
	uses := map[string]func(){
		"HasExecutable": func() {
			if has, err := f.c.exes.HasExecutable(ctx, &pb.HasExecutableRequest{Sha256: f.sha}); err != nil || !has.Found {
				t.Fatalf("HasExecutable: %v, %v", has, err)
			}
		},
		"download": func() {
			if _, err := download(ctx, f.c.exes, f.sha); err != nil {
				t.Fatal(err)
			}
		},
		"upload of the same bytes": func() {
			if err := uploadChunks(ctx, f.c.exes, f.sha, int64(len(f.data)), split(f.data, executableChunkBytes)); err != nil {
				t.Fatal(err)
			}
		},
	}
	for _, name := range []string{"HasExecutable", "download", "upload of the same bytes"} {
		clock.Advance(grace - time.Second)
		uses[name]()
		clock.Advance(grace - time.Second)
		if deleted := f.collect(t); len(deleted) != 0 {
			t.Fatalf("deleted %q within the grace after a use by %s", deleted, name)
		}
	}
	clock.Advance(time.Second)
	if deleted := f.collect(t); !slices.Equal(deleted, []string{f.sha}) {
		t.Fatalf("deleted %q, want [%s] once unused for the grace", deleted, f.sha)
	}
}

func TestExecutableOfALiveActorIsKept(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	f := newGCFixture(t, store.NewMemory(), clock)
	grace := f.s.cfg.ExecutableGracePeriod
	ctx := context.Background()

	jobID := f.connect(t, f.data)
	// Detached, so it outlives its job; with no node it stays PENDING_CREATION.
	reply, err := f.c.actors.CreateActor(ctx, &pb.CreateActorRequest{JobId: jobID, ClassName: "Counter", ExecutableSha256: f.sha,
		RequiredResources: map[string]float64{"CPU": 1}, IsDetached: true})
	if err != nil {
		t.Fatal(err)
	}
	f.finish(t, jobID)
	clock.Advance(10 * grace)
	if deleted := f.collect(t); len(deleted) != 0 {
		t.Fatalf("deleted %q while a detached actor that is not DEAD names it", deleted)
	}
	if _, err := f.c.actors.KillActor(ctx, &pb.KillActorRequest{ActorId: reply.Actor.ActorId, NoRestart: true}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(grace - time.Second)
	if deleted := f.collect(t); len(deleted) != 0 {
		t.Fatalf("deleted %q within the grace after its actor died", deleted)
	}
	clock.Advance(time.Second)
	if deleted := f.collect(t); !slices.Equal(deleted, []string{f.sha}) {
		t.Fatalf("deleted %q, want [%s] once its actor was dead for the grace", deleted, f.sha)
	}
}

// After a restart every stored executable counts as used at the restart.
func TestExecutableGraceRestartsWithTheGCS(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	st := keepOpenStore{store.NewMemory()}
	first := newGCFixture(t, st, clock)
	grace := first.s.cfg.ExecutableGracePeriod
	first.finish(t, first.connect(t, first.data))
	first.s.Stop()

	clock.Advance(10 * grace)
	second := newGCFixture(t, st, clock)
	if deleted := second.collect(t); len(deleted) != 0 {
		t.Fatalf("deleted %q right after a restart", deleted)
	}
	clock.Advance(grace)
	if deleted := second.collect(t); !slices.Equal(deleted, []string{second.sha}) {
		t.Fatalf("deleted %q, want [%s] a grace after the restart", deleted, second.sha)
	}
}

// The server's own loop collects, a tenth of the grace apart.
func TestExecutableCollectorLoopRuns(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	st := store.NewMemory()
	s := startGCS(t, st, func(c *Config) { c.Now = clock.Now; c.ExecutableGracePeriod = 200 * time.Millisecond })
	c := executableClient(t, s.Address(), 0)
	data := testBytes(100)
	sha := sha256Hex(data)
	if err := uploadChunks(context.Background(), c, sha, int64(len(data)), [][]byte{data}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	eventually(t, 5*time.Second, "the loop deletes the unused executable", func() error {
		keys, err := st.Keys(context.Background(), store.TableExecutables, "")
		if err != nil || len(keys) != 0 {
			return fmt.Errorf("keys %q (%v)", keys, err)
		}
		return nil
	})
}

func TestExecutableSweepInterval(t *testing.T) {
	for grace, want := range map[time.Duration]time.Duration{
		10 * time.Minute: time.Minute, time.Hour: time.Minute, 10 * time.Second: time.Second, time.Millisecond: 10 * time.Millisecond,
	} {
		if got := executableSweepInterval(grace); got != want {
			t.Errorf("executableSweepInterval(%s) = %s, want %s", grace, got, want)
		}
	}
}

func TestAddJobChecksTheExecutableHash(t *testing.T) {
	s := startGCS(t, store.NewMemory())
	c := dial(t, s.Address(), 0)
	_, err := c.jobs.AddJob(context.Background(), &pb.AddJobRequest{ExecutableSha256: "abc"})
	if err == nil || !strings.Contains(err.Error(), "executable_sha256") {
		t.Fatalf("AddJob with a malformed hash: %v", err)
	}
}
