// Package privdir keeps the directories and files a raygo process trusts (session
// directories, the raylet's executable cache, token files) out of other local users'
// reach: created owner-only, and checked — owner and mode — before use, so that a user
// who pre-creates a directory under /tmp cannot plant files there.
package privdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// Ensure creates dir (and missing parents) with mode 0700, or checks an existing one:
// it must be a directory, not a symlink, owned by this process's user, and not writable
// by anyone else. One that others may only read or enter is made owner-only.
func Ensure(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("directory %s: %w", dir, err)
	}
	info, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("directory %s: %w", dir, err)
	}
	if info.Mode()&fs.ModeSymlink != 0 || !info.IsDir() {
		return fmt.Errorf("directory %s: not a directory of its own (%s); remove it", dir, info.Mode().Type())
	}
	if err := checkOwner(dir, info); err != nil {
		return err
	}
	if perm := info.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("directory %s: mode %o lets other users write into it; remove it or chmod 700 %s", dir, perm, dir)
	} else if perm&0o077 != 0 {
		if err := os.Chmod(dir, perm&0o700); err != nil {
			return fmt.Errorf("directory %s: make it owner-only: %w", dir, err)
		}
	}
	return nil
}

// CheckFile checks that path is a regular file (not a symlink) owned by this process's
// user that no one else may write.
func CheckFile(path string) error {
	info, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("file %s: not a regular file (%s)", path, info.Mode().Type())
	}
	if err := checkOwner(path, info); err != nil {
		return err
	}
	if perm := info.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("file %s: mode %o lets other users change it", path, perm)
	}
	return nil
}

func checkOwner(path string, info fs.FileInfo) error {
	stat, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New(path + ": cannot read its owner")
	}
	if uid := os.Getuid(); int(stat.Uid) != uid {
		return fmt.Errorf("%s: owned by uid %d, not by this user (uid %d): another user could plant files there; remove it", path, stat.Uid, uid)
	}
	return nil
}
