//go:build !unix

package boundedfile

import "io/fs"

// CheckPrivate checks nothing outside unix: a Windows directory's access is
// its ACL, which mode bits do not show (docs/contract.md says so).
func CheckPrivate(fs.FileInfo) error { return nil }

// CheckAncestor checks nothing outside unix, as CheckPrivate.
func CheckAncestor(fs.FileInfo) error { return nil }
