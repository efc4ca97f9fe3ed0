package doctor

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// statFilesystem identifies the filesystem holding dir: statfs(2) gives
// the type's magic number, which is what the kernel itself goes by, and
// /proc/self/mountinfo (one small read) adds the exact name, the FUSE
// subtype, the source and NFS's local_lock option.
func statFilesystem(dir string) (Filesystem, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Filesystem{}, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	magic := int64(uint32(st.Type))
	fs := Filesystem{Magic: fmt.Sprintf("%#x", magic), Type: magicNames[magic]}
	// An entry found by device number is this very filesystem, and its
	// name is exact; one found only by path (a btrfs subvolume) is
	// trusted only where the magic number says nothing.
	if m, sameDev, ok := findMount(dir); ok && (sameDev || fs.Type == "") {
		fs.Mount = m.point
		fs.Source = m.source
		fs.Type = m.fstype
		if strings.HasPrefix(m.fstype, "nfs") {
			fs.LocalLock = optionValue(m.options, "local_lock")
		}
	}
	fs.classify()
	return fs, nil
}

type mountEntry struct {
	dev     string // "major:minor"
	point   string
	fstype  string
	source  string
	options string // the superblock options, after the separator
}

// findMount returns the mountinfo entry for dir: among the mounts of the
// device dir is on, the one with the longest mount point containing dir;
// failing that (a btrfs subvolume reports another device number than its
// mount), the longest mount point containing dir.
func findMount(dir string) (m mountEntry, sameDev, ok bool) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return mountEntry{}, false, false
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	var st unix.Stat_t
	dev := ""
	if unix.Stat(abs, &st) == nil {
		dev = fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return mountEntry{}, false, false
	}
	defer f.Close()
	var byDev, byPath mountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		m, ok := parseMountinfo(sc.Text())
		if !ok || !within(abs, m.point) {
			continue
		}
		if len(m.point) >= len(byPath.point) {
			byPath = m
		}
		if m.dev == dev && len(m.point) >= len(byDev.point) {
			byDev = m
		}
	}
	if byDev.point != "" {
		return byDev, true, true
	}
	return byPath, false, byPath.point != ""
}

// parseMountinfo parses one line of /proc/self/mountinfo:
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// (see proc(5)); the optional fields end at the "-".
func parseMountinfo(line string) (mountEntry, bool) {
	f := strings.Fields(line)
	sep := -1
	for i := 6; i < len(f); i++ {
		if f[i] == "-" {
			sep = i
			break
		}
	}
	if len(f) < 7 || sep < 0 || sep+2 >= len(f) {
		return mountEntry{}, false
	}
	m := mountEntry{dev: f[2], point: unescapeOctal(f[4]), fstype: f[sep+1], source: unescapeOctal(f[sep+2])}
	if sep+3 < len(f) {
		m.options = f[sep+3]
	}
	return m, true
}

// unescapeOctal undoes mountinfo's escaping of space, tab, newline and
// backslash as \ooo.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// within reports whether path is mount point or lies below it.
func within(path, mount string) bool {
	if mount == "/" || path == mount {
		return true
	}
	return strings.HasPrefix(path, mount+"/")
}

// optionValue returns the value of key=value in a comma-separated list.
func optionValue(options, key string) string {
	for _, o := range strings.Split(options, ",") {
		if v, ok := strings.CutPrefix(o, key+"="); ok {
			return v
		}
	}
	return ""
}
