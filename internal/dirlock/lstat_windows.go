package dirlock

import (
	"os"

	"golang.org/x/sys/windows"
)

// lstat is os.Lstat with the file's identity read at once. On Windows
// os.Lstat reads only the attributes, and os.SameFile fetches the volume
// and file ID later, by opening the path again when it compares: by then
// the path may hold another directory or nothing (a reclaim has just
// renamed it to a tomb), so a judged lock compared with what was moved
// never matched, and reclaim put every stale lock back and waited
// forever. The handle shares everything, so it stops nobody's rename or
// removal for the microseconds it is open.
func lstat(path string) (os.FileInfo, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return nil, &os.PathError{Op: "lstat", Path: path, Err: err}
	}
	h, err := windows.CreateFile(p, 0,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil,
		windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS|windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	if err != nil {
		return nil, &os.PathError{Op: "lstat", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(h), path)
	defer f.Close()
	return f.Stat()
}
