package connection

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// pathSeparators are the characters that make a command a path rather than
// a name looked up in PATH: Windows takes both slashes.
const pathSeparators = `/\`

// platformEnvNames are the variables a Windows program needs to run at
// all (SystemRoot: Winsock and the crypto provider fail without it) or to
// find its files (the profile and application-data directories, PATHEXT to
// run a script), passed on as baseEnvNames are.
var platformEnvNames = []string{
	"SystemRoot", "SystemDrive", "WINDIR", "COMSPEC", "PATHEXT",
	"TEMP", "TMP", "USERPROFILE", "APPDATA", "LOCALAPPDATA", "ProgramData",
	"ProgramFiles", "ProgramFiles(x86)", "HOMEDRIVE", "HOMEPATH", "USERNAME",
	"NUMBER_OF_PROCESSORS", "PROCESSOR_ARCHITECTURE",
}

// executableExts are the extensions Windows runs, from PATHEXT as cmd.exe
// reads it (os/exec's LookPath does the same), lower-cased.
func executableExts() []string {
	pathext := os.Getenv("PATHEXT")
	if pathext == "" {
		pathext = ".com;.exe;.bat;.cmd"
	}
	var exts []string
	for _, e := range filepath.SplitList(strings.ToLower(pathext)) {
		if strings.HasPrefix(e, ".") {
			exts = append(exts, e)
		}
	}
	return exts
}

// findExecutable returns path, or path with the first PATHEXT extension
// that names an executable file, as Windows resolves "node" to node.exe.
func findExecutable(path string) (string, bool) {
	if isExecutable(path) == nil {
		return path, true
	}
	for _, ext := range executableExts() {
		if isExecutable(path+ext) == nil {
			return path + ext, true
		}
	}
	return "", false
}

// isExecutable: Windows has no execute bit (Go reports every file as
// 0666 or 0444), so a file is executable when its extension is in PATHEXT.
func isExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	ext := strings.ToLower(filepath.Ext(path))
	for _, e := range executableExts() {
		if ext == e {
			return nil
		}
	}
	return fmt.Errorf("%s: not a program (its extension is not in PATHEXT): %w", path, fs.ErrPermission)
}

// checkArgs refuses arguments that cmd.exe would misread when the program
// is a batch file (batchArgsError).
func checkArgs(path string, args []string) error { return batchArgsError(path, args) }
