package privdir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEnsureCreatesOwnerOnlyAndChecksWhatExists(t *testing.T) {
	root := t.TempDir()
	fresh := filepath.Join(root, "a", "b")
	if err := Ensure(fresh); err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(fresh); info.Mode().Perm() != 0o700 {
		t.Fatalf("created with mode %o, want 700", info.Mode().Perm())
	}
	readable := filepath.Join(root, "readable")
	if err := os.Mkdir(readable, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Ensure(readable); err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(readable); info.Mode().Perm() != 0o700 {
		t.Fatalf("a readable directory of ours: mode %o after Ensure, want 700", info.Mode().Perm())
	}
	writable := filepath.Join(root, "writable")
	if err := os.Mkdir(writable, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(writable, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	if err := Ensure(writable); err == nil || !strings.Contains(err.Error(), "write") {
		t.Fatalf("a directory others can write: %v, want refused", err)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(fresh, link); err != nil {
		t.Fatal(err)
	}
	if err := Ensure(link); err == nil {
		t.Fatal("a symlink was accepted as the directory")
	}
	if os.Getuid() == 0 {
		// Root can make the other user's directory that the attack is about.
		foreign := filepath.Join(root, "foreign")
		if err := os.Mkdir(foreign, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(foreign, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if err := Ensure(foreign); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
			t.Fatalf("another user's directory: %v, want refused naming its owner", err)
		}
	}
}

func TestCheckFile(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	if err := os.WriteFile(ok, nil, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := CheckFile(ok); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(dir, "open")
	if err := os.WriteFile(open, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := CheckFile(open); err == nil {
		t.Fatal("a file others can write was accepted")
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(ok, link); err != nil {
		t.Fatal(err)
	}
	if err := CheckFile(link); err == nil {
		t.Fatal("a symlink was accepted")
	}
}
