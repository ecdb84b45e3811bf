package gcs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/raygo-dev/raygo/gcs/store"
)

// Worker executables are collected as Ray collects working_dir packages: one that no
// live job or actor names, and that nobody used for Config.ExecutableGracePeriod, is
// deleted from the store. The grace lets a driver re-run right after the last one reuse
// the upload.

// executableRefs is what the job and actor tables say of the executables they name.
type executableRefs struct {
	// live holds the executables a job that is not dead, or an actor that is not DEAD,
	// names.
	live map[string]bool
	// endedMs is, for executables that dead jobs or DEAD actors name, the latest of
	// their end times in Unix milliseconds: the last use they made of it.
	endedMs map[string]int64
}

func newExecutableRefs() executableRefs {
	return executableRefs{live: map[string]bool{}, endedMs: map[string]int64{}}
}

// add records one job's or actor's executable ("" names none).
func (r executableRefs) add(sha string, live bool, endMs int64) {
	switch {
	case sha == "":
	case live:
		r.live[sha] = true
	case endMs > r.endedMs[sha]:
		r.endedMs[sha] = endMs
	}
}

// executablesToDelete decides which stored executables go: those not referenced (named
// by a live job or actor) whose last use is grace or more before now. lastUse has an
// entry for every stored executable. The result is sorted.
func executablesToDelete(lastUse map[string]time.Time, referenced map[string]bool, now time.Time, grace time.Duration) []string {
	var doomed []string
	for sha, last := range lastUse {
		if !referenced[sha] && now.Sub(last) >= grace {
			doomed = append(doomed, sha)
		}
	}
	slices.Sort(doomed)
	return doomed
}

// executableSweepInterval is how often the collector runs: a tenth of the grace (so an
// executable outlives it by at most that), between 10 ms and a minute.
func executableSweepInterval(grace time.Duration) time.Duration {
	return min(max(grace/10, 10*time.Millisecond), time.Minute)
}

// collectExecutablesLoop deletes unused executables every executableSweepInterval,
// until stop closes.
func (s *Server) collectExecutablesLoop(stop <-chan struct{}) {
	ticker := time.NewTicker(executableSweepInterval(s.cfg.ExecutableGracePeriod))
	defer ticker.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ticker.C:
		}
		if _, err := s.collectUnusedExecutables(context.Background()); err != nil {
			select {
			case <-stop: // the store closed under the round
				return
			default:
				s.log.Error().Err(err).Msg("could not collect unused executables")
			}
		}
	}
}

// collectUnusedExecutables runs one collection and returns the hashes it deleted.
func (s *Server) collectUnusedExecutables(ctx context.Context) ([]string, error) {
	// The references are read before the executables are locked: a job or actor that
	// names an executable after this either checked it (HasExecutable, CreateActor),
	// which is a use the collection sees, or checks it after the deletion and uploads
	// it again.
	refs := newExecutableRefs()
	s.jobs.addExecutableRefs(refs)
	s.actors.addExecutableRefs(refs)
	return s.executables.collect(ctx, refs)
}

// collect deletes the stored executables executablesToDelete picks, each (manifest and
// chunks) in one atomic batch, and returns their hashes; on a store error it returns
// those deleted before it.
func (x *executableService) collect(ctx context.Context, refs executableRefs) ([]string, error) {
	x.sweeping.Lock()
	defer x.sweeping.Unlock()
	now := x.now()
	stored, err := x.storedKeys(ctx)
	if err != nil {
		return nil, err
	}
	x.useMu.Lock()
	lastUse := make(map[string]time.Time, len(stored))
	for sha := range stored {
		last, ok := x.lastUse[sha]
		if !ok {
			last = x.startTime
		}
		if refs.live[sha] {
			last = now
		}
		if ended := time.UnixMilli(refs.endedMs[sha]); ended.After(last) {
			last = ended
		}
		lastUse[sha] = last
	}
	x.lastUse = lastUse // also forgets what left the store
	x.useMu.Unlock()

	doomed := executablesToDelete(lastUse, refs.live, now, x.grace)
	var deleted []string
	for _, sha := range doomed {
		size := int64(0)
		if m, err := x.manifest(ctx, sha); err == nil && m != nil {
			size = m.Size
		}
		ops := make([]store.Op, 0, len(stored[sha]))
		for _, key := range stored[sha] {
			ops = append(ops, store.Op{Kind: store.OpDelete, Table: store.TableExecutables, Key: key})
		}
		if err := x.store.Apply(ctx, ops); err != nil {
			return deleted, fmt.Errorf("delete executable %s: %w", sha, err)
		}
		x.useMu.Lock()
		delete(x.lastUse, sha)
		x.useMu.Unlock()
		deleted = append(deleted, sha)
		x.log.Info().Str("sha256", sha).Int64("bytes", size).Dur("unused_for", now.Sub(lastUse[sha])).
			Msg("deleted an unused executable")
	}
	return deleted, nil
}

// storedKeys lists the stored executables: each hash with a manifest, with all its keys
// (the manifest and the chunks).
func (x *executableService) storedKeys(ctx context.Context) (map[string][]string, error) {
	keys, err := x.store.Keys(ctx, store.TableExecutables, "")
	if err != nil {
		return nil, fmt.Errorf("list executables: %w", err)
	}
	stored := map[string][]string{}
	for _, key := range keys {
		if !strings.Contains(key, "/") {
			stored[key] = append(stored[key], key)
		}
	}
	for _, key := range keys {
		if sha, _, ok := strings.Cut(key, "/"); ok {
			if _, manifested := stored[sha]; manifested {
				stored[sha] = append(stored[sha], key)
			}
		}
	}
	return stored, nil
}
