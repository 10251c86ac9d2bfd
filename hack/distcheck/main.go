// Command distcheck checks the release archives that `make dist`
// (GoReleaser, .goreleaser.yaml) wrote into a directory: every platform's
// archive is there, in its format, with its binaries, LICENSE and README;
// each binary is built for the archive's platform (its ELF, Mach-O or PE
// header's machine, and the GOOS/GOARCH and -ldflags the Go toolchain
// recorded in it) and stamped with the version, commit and date; and the
// checksums file lists every archive with its SHA-256. hack/verify-dist.sh
// runs it.
//
//	go run ./hack/distcheck -dir _output/dist -version 1.2.3-snapshot -commit SHA -date 2025-01-02T03:04:05Z
package main

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// platforms are the release's, as .goreleaser.yaml lists them.
var platforms = []platform{
	{"linux", "amd64"}, {"linux", "arm64"},
	{"darwin", "amd64"}, {"darwin", "arm64"},
	{"windows", "amd64"}, {"windows", "arm64"},
}

// binaries are what each archive holds besides its documents.
var binaries = []string{"tether", "tether-example-server"}

// maxBinary bounds what is read of one archive member: a release binary is
// tens of megabytes.
const maxBinary = 256 << 20

type platform struct{ os, arch string }

func (p platform) String() string { return p.os + "/" + p.arch }

func main() {
	dir := flag.String("dir", "_output/dist", "the directory GoReleaser wrote")
	version := flag.String("version", "", "the version every binary must be stamped with")
	commit := flag.String("commit", "", "the commit every binary must be stamped with")
	date := flag.String("date", "", "the date tether must be stamped with (the commit's, RFC 3339 UTC)")
	flag.Parse()
	if *version == "" || *commit == "" || *date == "" {
		fmt.Fprintln(os.Stderr, "distcheck: -version, -commit and -date are required")
		os.Exit(2)
	}
	report, err := check(*dir, *version, *commit, *date)
	fmt.Print(report)
	if err != nil {
		fmt.Fprintln(os.Stderr, "distcheck:", err)
		os.Exit(1)
	}
}

// check checks dir and returns one line per archive, or every problem found.
func check(dir, version, commit, date string) (string, error) {
	var report strings.Builder
	var problems []error
	sums, err := readChecksums(filepath.Join(dir, "checksums.txt"))
	if err != nil {
		return "", err
	}
	for _, p := range platforms {
		name := archiveName(version, p)
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", p, err))
			continue
		}
		if err := checkSum(path, sums[name]); err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", name, err))
		}
		delete(sums, name)
		members, err := readArchive(path)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", name, err))
			continue
		}
		for _, doc := range []string{"LICENSE", "README.md"} {
			if _, ok := members[doc]; !ok {
				problems = append(problems, fmt.Errorf("%s: no %s", name, doc))
			}
		}
		for _, b := range binaries {
			if p.os == "windows" {
				b += ".exe"
			}
			m, ok := members[b]
			if !ok {
				problems = append(problems, fmt.Errorf("%s: no %s", name, b))
				continue
			}
			if p.os != "windows" && m.mode&0o111 == 0 {
				problems = append(problems, fmt.Errorf("%s: %s is not executable (mode %v)", name, b, m.mode))
			}
			stamps := []string{version, commit, date}
			if !strings.HasPrefix(b, "tether.") && b != "tether" {
				stamps = stamps[:1] // the example server has a version only
			}
			if err := checkBinary(m.data, p, stamps); err != nil {
				problems = append(problems, fmt.Errorf("%s: %s: %w", name, b, err))
			}
		}
		fmt.Fprintf(&report, "%-40s %6.1f MB  %s\n", name, float64(fi.Size())/(1<<20), p)
	}
	for extra := range sums {
		problems = append(problems, fmt.Errorf("checksums.txt lists %s, which is no release archive", extra))
	}
	return report.String(), errors.Join(problems...)
}

// archiveName is .goreleaser.yaml's name_template.
func archiveName(version string, p platform) string {
	ext := ".tar.gz"
	if p.os == "windows" {
		ext = ".zip"
	}
	return fmt.Sprintf("tether_%s_%s_%s%s", version, p.os, p.arch, ext)
}

// readChecksums reads sha256sum's format: "HEX  NAME" per line.
func readChecksums(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != sha256.Size*2 {
			return nil, fmt.Errorf("%s: line %q is not \"SHA256  NAME\"", path, sc.Text())
		}
		sums[name] = sum
	}
	return sums, sc.Err()
}

func checkSum(path, want string) error {
	if want == "" {
		return errors.New("not in checksums.txt")
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("SHA-256 %s, checksums.txt says %s", got, want)
	}
	return nil
}

// member is one regular file of an archive.
type member struct {
	data []byte
	mode os.FileMode
}

// readArchive returns the regular files of a tar.gz or zip by name.
func readArchive(path string) (map[string]member, error) {
	out := map[string]member{}
	if strings.HasSuffix(path, ".zip") {
		z, err := zip.OpenReader(path)
		if err != nil {
			return nil, err
		}
		defer z.Close()
		for _, f := range z.File {
			if f.FileInfo().IsDir() {
				continue
			}
			r, err := f.Open()
			if err != nil {
				return nil, err
			}
			data, err := readBounded(r, f.Name)
			r.Close()
			if err != nil {
				return nil, err
			}
			out[f.Name] = member{data, f.Mode()}
		}
		return out, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := readBounded(tr, h.Name)
		if err != nil {
			return nil, err
		}
		out[h.Name] = member{data, h.FileInfo().Mode()}
	}
}

func readBounded(r io.Reader, name string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxBinary+1))
	if err == nil && len(data) > maxBinary {
		err = fmt.Errorf("%s is over %d MB", name, maxBinary>>20)
	}
	return data, err
}

// checkBinary checks that data is an executable of platform p, stamped
// with stamps (the version, and tether's commit and date).
func checkBinary(data []byte, p platform, stamps []string) error {
	got, err := machineOf(data)
	if err != nil {
		return err
	}
	if got != p {
		return fmt.Errorf("its header says %s, want %s", got, p)
	}
	info, err := buildinfo.Read(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("no Go build information: %w", err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["GOOS"] != p.os || settings["GOARCH"] != p.arch {
		return fmt.Errorf("built for GOOS=%s GOARCH=%s, want %s", settings["GOOS"], settings["GOARCH"], p)
	}
	if settings["CGO_ENABLED"] != "0" {
		return errors.New("built with cgo: the release binaries are static")
	}
	// -trimpath keeps -ldflags out of the build information, so the
	// stamped strings are looked for in the binary's data, where -X puts
	// them verbatim (a 40-digit commit is found nowhere else).
	for _, want := range stamps {
		if !bytes.Contains(data, []byte(want)) {
			return fmt.Errorf("not stamped with %q (-X main.version, main.commit, main.date)", want)
		}
	}
	return nil
}

// machineOf reads the platform an executable is for from its header.
func machineOf(data []byte) (platform, error) {
	r := bytes.NewReader(data)
	if f, err := elf.NewFile(r); err == nil {
		if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
			return platform{}, fmt.Errorf("ELF type %v is not an executable", f.Type)
		}
		switch f.Machine {
		case elf.EM_X86_64:
			return platform{"linux", "amd64"}, nil
		case elf.EM_AARCH64:
			return platform{"linux", "arm64"}, nil
		}
		return platform{}, fmt.Errorf("ELF machine %v", f.Machine)
	}
	if f, err := macho.NewFile(r); err == nil {
		if f.Type != macho.TypeExec {
			return platform{}, fmt.Errorf("Mach-O type %v is not an executable", f.Type)
		}
		switch f.Cpu {
		case macho.CpuAmd64:
			return platform{"darwin", "amd64"}, nil
		case macho.CpuArm64:
			return platform{"darwin", "arm64"}, nil
		}
		return platform{}, fmt.Errorf("Mach-O CPU %v", f.Cpu)
	}
	if f, err := pe.NewFile(r); err == nil {
		if f.Characteristics&pe.IMAGE_FILE_EXECUTABLE_IMAGE == 0 {
			return platform{}, errors.New("PE image is not an executable")
		}
		switch f.Machine {
		case pe.IMAGE_FILE_MACHINE_AMD64:
			return platform{"windows", "amd64"}, nil
		case pe.IMAGE_FILE_MACHINE_ARM64:
			return platform{"windows", "arm64"}, nil
		}
		return platform{}, fmt.Errorf("PE machine %#x", f.Machine)
	}
	return platform{}, errors.New("neither ELF, Mach-O nor PE")
}
