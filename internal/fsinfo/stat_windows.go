package fsinfo

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/windows"
)

// Stat identifies the volume holding dir: GetVolumePathName finds
// its root, GetVolumeInformation names its filesystem ("NTFS", "ReFS",
// "FAT32") and GetDriveType says whether it is a network share.
func Stat(dir string) (Filesystem, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Filesystem{}, err
	}
	p, err := windows.UTF16PtrFromString(abs)
	if err != nil {
		return Filesystem{}, err
	}
	var root [windows.MAX_PATH + 1]uint16
	if err := windows.GetVolumePathName(p, &root[0], uint32(len(root))); err != nil {
		return Filesystem{}, &os.PathError{Op: "GetVolumePathName", Path: dir, Err: err}
	}
	var name [windows.MAX_PATH + 1]uint16
	if err := windows.GetVolumeInformation(&root[0], nil, 0, nil, nil, nil, &name[0], uint32(len(name))); err != nil {
		return Filesystem{}, &os.PathError{Op: "GetVolumeInformation", Path: dir, Err: err}
	}
	fs := Filesystem{
		Type:  windows.UTF16ToString(name[:]),
		Mount: windows.UTF16ToString(root[:]),
	}
	fs.classify()
	if windows.GetDriveType(&root[0]) == windows.DRIVE_REMOTE {
		// An SMB share reports the server's filesystem name (often
		// "NTFS"), so the drive type decides.
		fs.Network = true
		fs.Known = true
		fs.Class = ServerLocks
	}
	return fs, nil
}
