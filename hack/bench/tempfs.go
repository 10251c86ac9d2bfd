package main

import (
	"os"
	"path/filepath"
	"strings"
)

// tempFS names the file system that holds the benchmark's trees (the
// system's temporary directory: TMPDIR), as "/tmp: ext4 on /dev/vda, no
// journal". Every start writes a status file per connection there, and
// what a file creation costs differs by an order of magnitude between file
// systems: ext4 without a journal skips the inodes deleted in the last
// seconds to minutes, one by one, on every allocation (fs/ext4/ialloc.c,
// find_inode_bit), so right after a run removed its trees the next run's
// files cost hundreds of µs of kernel CPU each, against tens on tmpfs or a
// journaled ext4. "" off Linux or when /proc cannot tell.
func tempFS() string {
	dir, err := filepath.EvalSymlinks(os.TempDir())
	if err != nil {
		return ""
	}
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	return describeFS(string(mountinfo), dir, func(dev string) bool {
		_, err := os.Stat(filepath.Join("/proc/fs/jbd2", dev+"-8"))
		return err == nil
	})
}

// describeFS finds the mount of dir in mountinfo (proc(5): the mount point
// is the fifth field; the file system type and source follow the " - "
// separator) and describes it; journaled tells whether an ext4 device has
// a journal (jbd2 lists it in /proc/fs/jbd2 as DEVICE-8).
func describeFS(mountinfo, dir string, journaled func(dev string) bool) string {
	best, fsType, source := "", "", ""
	for _, line := range strings.Split(mountinfo, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 2 {
			continue
		}
		mp := unescapeMount(f[4])
		if !within(dir, mp) || len(mp) < len(best) {
			continue
		}
		best, fsType, source = mp, g[0], g[1]
	}
	if fsType == "" {
		return ""
	}
	s := dir + ": " + fsType
	if strings.HasPrefix(source, "/dev/") {
		s += " on " + source
	}
	if fsType == "ext4" && strings.HasPrefix(source, "/dev/") {
		if journaled(filepath.Base(source)) {
			s += ", journal"
		} else {
			s += ", no journal"
		}
	}
	return s
}

// within tells whether path is mp or below it.
func within(path, mp string) bool {
	return mp == "/" || path == mp || strings.HasPrefix(path, mp+"/")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}
