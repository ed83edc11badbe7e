package testns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Names of test namespaces carry their owner, "<pid>.<start time>", right
// after their prefix: PREFIX OWNER "-" REST. A test that dies before its
// cleanup runs (a go test timeout, a SIGKILL) cannot remove what it made;
// the next run that creates namespaces of the same prefix removes those
// whose owner is gone. The start time tells a reused pid from its original
// process. Namespaces of live processes stay: other packages' tests may be
// running right now.

// Owner returns this process's owner tag, "<pid>.<start time>".
func Owner() (string, error) {
	start, err := procStartTime(os.Getpid())
	if err != nil {
		return "", fmt.Errorf("owner tag: %w", err)
	}
	return fmt.Sprintf("%d.%s", os.Getpid(), start), nil
}

// procStartTime returns field 22 of /proc/PID/stat (start time in clock
// ticks since boot), which together with the pid identifies a process.
func procStartTime(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	// The command name (field 2) may contain spaces; fields after it don't.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return "", fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return f[19], nil
}

// Alive reports whether the owner of a name made as PREFIX OWNER "-" REST
// still runs, given the name without its prefix: for test leftovers other
// than namespaces (a container runtime's directory) swept the same way.
func Alive(rest string) bool { return ownerAlive(rest) }

// ownerAlive reports whether the process named by the owner tag at the
// start of rest (up to the first "-") still runs. A name without a tag
// has no live owner.
func ownerAlive(rest string) bool {
	owner, _, ok := strings.Cut(rest, "-")
	if !ok {
		return false
	}
	pidStr, start, ok := strings.Cut(owner, ".")
	if !ok {
		return false
	}
	pid, err := strconv.Atoi(pidStr)
	if err != nil || pid <= 0 {
		return false
	}
	now, err := procStartTime(pid)
	return err == nil && now == start
}

// SweepStale removes every namespace under Dir whose name starts with
// prefix and whose owner process is gone.
func SweepStale(prefix string) error {
	names, err := Leftovers(prefix)
	if err != nil {
		return fmt.Errorf("list namespaces %s*: %w", prefix, err)
	}
	var errs []error
	for _, n := range names {
		if ownerAlive(strings.TrimPrefix(n, prefix)) {
			continue
		}
		err := removeFile(n)
		if errors.Is(err, unix.EBUSY) {
			// The leftover is still in use or its mount is hidden
			// under a later mount of Dir: only an operator can
			// remove it. New names never collide with it, so say so
			// and go on rather than fail every lab after it.
			fmt.Fprintf(os.Stderr, "testns: leaving stale namespace %s: %v\n", n, err)
			continue
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeFile unmounts and removes a leftover namespace file. Another
// process may be removing the same leftover concurrently, and a crash inside
// netns.NewNamed can leave an unmounted file: neither is an error.
func removeFile(name string) error {
	path := filepath.Join(Dir, name)
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
		return fmt.Errorf("remove stale namespace %s: %w", name, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale namespace %s: %w", name, err)
	}
	return nil
}
