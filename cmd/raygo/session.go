package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/raygo-dev/raygo/internal/privdir"
	"github.com/raygo-dev/raygo/internal/proc"
)

// defaultTempDir holds the session directories, as /tmp/ray does for Ray.
const defaultTempDir = "/tmp/raygo"

// tempDir is --temp-dir, else RAYGO_TEMP_DIR, else /tmp/raygo.
func tempDir(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if env := os.Getenv("RAYGO_TEMP_DIR"); env != "" {
		return env
	}
	return defaultTempDir
}

// nodeRecord is written to <session>/nodes/<node id>.json once a node is up; `raygo stop`
// finds the supervisors to stop through these files.
type nodeRecord struct {
	NodeID        string `json:"node_id"`
	IsHead        bool   `json:"is_head"`
	GCSAddress    string `json:"gcs_address"`
	SupervisorPID int    `json:"supervisor_pid"`
	GCSPID        int    `json:"gcs_pid,omitempty"`
	RayletPID     int    `json:"raylet_pid"`
	SessionDir    string `json:"session_dir"`
	LogDir        string `json:"log_dir"`
	// Autoscaler: the head runs an autoscaler (--autoscaling-config).
	Autoscaler bool `json:"autoscaler,omitempty"`
}

// newSessionDir creates <temp>/session_<time>_<pid> with logs/ and nodes/, and points
// <temp>/session_latest at it.
func newSessionDir(temp string) (string, error) {
	name := fmt.Sprintf("session_%s_%d", time.Now().Format("2006-01-02_15-04-05.000000"), os.Getpid())
	dir := filepath.Join(temp, name)
	// Owner-only, and checked: `raygo stop` signals the pids the node records name, so
	// another user must not be able to write them (--temp-dir, RAYGO_TEMP_DIR move it).
	for _, d := range []string{temp, dir, filepath.Join(dir, "logs"), filepath.Join(dir, "nodes")} {
		if err := privdir.Ensure(d); err != nil {
			return "", fmt.Errorf("session directory: %w", err)
		}
	}
	latest := filepath.Join(temp, "session_latest")
	_ = os.Remove(latest)
	_ = os.Symlink(name, latest)
	return dir, nil
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// runningNodeRecords returns the records under temp whose supervisor is still a live
// raygo process.
func runningNodeRecords(temp string) ([]nodeRecord, error) {
	paths, err := filepath.Glob(filepath.Join(temp, "session_*", "nodes", "*.json"))
	if err != nil {
		return nil, err
	}
	var out []nodeRecord
	for _, p := range paths {
		if strings.Contains(p, "session_latest") {
			continue // a symlink to one of the others
		}
		if privdir.CheckFile(p) != nil {
			continue // not this user's alone: its pids are not ours to signal
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var rec nodeRecord
		if json.Unmarshal(raw, &rec) != nil {
			continue
		}
		if isRaygoProcess(rec.SupervisorPID) {
			out = append(out, rec)
		} else {
			_ = os.Remove(p)
		}
	}
	return out, nil
}

// isRaygoProcess reports whether pid is alive and runs raygo (pids are reused).
func isRaygoProcess(pid int) bool {
	return proc.Alive(pid) && proc.CommandLineContains(pid, "raygo")
}
