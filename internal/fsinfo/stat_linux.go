package fsinfo

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Stat identifies the filesystem holding path: statfs(2) gives the type's
// magic number, which is what the kernel itself goes by, and
// /proc/self/mountinfo (one small read) adds the exact name, the FUSE
// subtype, the source and the mount options that keep locks local.
func Stat(path string) (Filesystem, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return Filesystem{}, &os.PathError{Op: "statfs", Path: path, Err: err}
	}
	fs := fromMountinfo(path, magicOf(&st))
	if fs.FUSE && fs.Subtype == "" && filepath.IsAbs(fs.Source) {
		// One level only: a mirror of a mirror is named, not followed.
		var mst unix.Statfs_t
		if fi, err := os.Stat(fs.Source); err == nil && fi.IsDir() && unix.Statfs(fs.Source, &mst) == nil {
			m := fromMountinfo(fs.Source, magicOf(&mst))
			fs.Mirror = &m
		}
	}
	return fs, nil
}

// magicOf returns statfs's f_type as the unsigned 32-bit number the
// kernel's constants are.
func magicOf(st *unix.Statfs_t) int64 { return int64(uint32(st.Type)) }

// fromMountinfo completes what statfs said (magic) with path's entry in
// /proc/self/mountinfo, and classifies the result.
func fromMountinfo(path string, magic int64) Filesystem {
	fs := Filesystem{Magic: hexMagic(magic), Type: magicNames[magic]}
	// An entry found by device number is this very filesystem, and its
	// name is exact; one found only by path (a btrfs subvolume) is
	// trusted only where the magic number says nothing.
	if m, sameDev, ok := findMount(path); ok && (sameDev || fs.Type == "") {
		fs.Mount = m.point
		fs.Source = m.source
		fs.Type = m.fstype
		fs.noteLockOptions(m.options)
	}
	fs.classify()
	return fs
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

// hexMagic spells a magic number as Filesystem.Magic does: "0xef53".
func hexMagic(magic int64) string { return fmt.Sprintf("%#x", magic) }
