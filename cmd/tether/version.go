package main

import (
	"cmp"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Stamped by a release build (the Makefile's build target, .goreleaser.yaml,
// the Dockerfile): -ldflags "-X main.version=v1.2.3 -X main.commit=SHA
// -X main.date=RFC3339". A plain `go build` or `go install` leaves them
// empty and currentBuild takes what the Go toolchain recorded instead.
var (
	version string
	commit  string
	date    string
)

// version is what the rest of tether reports (logs, metrics, traces, the
// MCP implementation info): the stamped version, or what currentBuild found.
func init() { version = currentBuild().Version }

// build is what `tether version` reports: enough for a bug report to name
// the exact binary.
type build struct {
	Version, Commit, Date, Go, Platform string
}

func (b build) String() string {
	return fmt.Sprintf("tether %s (commit %s, built %s) %s %s", b.Version, b.Commit, b.Date, b.Go, b.Platform)
}

// currentBuild is this binary's build.
func currentBuild() build {
	info, _ := debug.ReadBuildInfo()
	return describeBuild(version, commit, date, info)
}

// describeBuild fills what the linker flags left empty from the build
// information the Go toolchain embeds: the module version (`go install
// module@v1.2.3`) and the VCS revision, its dirtiness and commit time
// (`go build` in a checkout, unless -buildvcs=false). What neither knows is
// "unknown", never a made-up value.
func describeBuild(ldVersion, ldCommit, ldDate string, info *debug.BuildInfo) build {
	b := build{Version: ldVersion, Commit: ldCommit, Date: ldDate, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if info != nil {
		if b.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
		var revision, modified, vcsTime string
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value
			case "vcs.time":
				vcsTime = s.Value
			}
		}
		if b.Commit == "" && revision != "" {
			b.Commit = revision
			if modified == "true" {
				b.Commit += "-dirty"
			}
		}
		b.Date = cmp.Or(b.Date, vcsTime)
	}
	b.Version = cmp.Or(b.Version, "(devel)")
	b.Commit = cmp.Or(b.Commit, "unknown")
	b.Date = cmp.Or(b.Date, "unknown")
	return b
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print tether's version, commit, build date, Go version and platform",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), currentBuild())
			return nil
		},
	}
}
