package manifest

import (
	"io/fs"

	"golang.org/x/sys/windows"
)

// fileID tells one directory from another whatever path names it: on
// Windows the volume serial number and the file index, which a FileInfo
// does not carry, so the path (symlinks and junctions followed) is opened
// to read them. A directory that cannot be opened has no ID and is walked
// as it comes; a cycle through it is then cut by the path length limit.
type fileID struct {
	volume uint32
	index  uint64
}

func idOf(path string, _ fs.FileInfo) (fileID, bool) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return fileID{}, false
	}
	// FILE_FLAG_BACKUP_SEMANTICS is what opens a directory; no access
	// right is asked for, only the attributes are read.
	h, err := windows.CreateFile(p, 0, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE,
		nil, windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
	if err != nil {
		return fileID{}, false
	}
	defer windows.CloseHandle(h)
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &info); err != nil {
		return fileID{}, false
	}
	return fileID{info.VolumeSerialNumber, uint64(info.FileIndexHigh)<<32 | uint64(info.FileIndexLow)}, true
}
