package main

import (
	"bytes"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestDescribeBuild(t *testing.T) {
	vcs := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123abcd"},
		{Key: "vcs.time", Value: "2026-11-25T20:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	installed := &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}
	for _, c := range []struct {
		name              string
		ver, commit, date string
		info              *debug.BuildInfo
		want              build
	}{
		{"stamped by a release", "v1.2.3", "feedbeef", "2026-11-25T23:00:00Z", vcs,
			build{Version: "v1.2.3", Commit: "feedbeef", Date: "2026-11-25T23:00:00Z"}},
		{"go build in a dirty checkout", "", "", "", vcs,
			build{Version: "(devel)", Commit: "0123abcd-dirty", Date: "2026-11-25T20:00:00Z"}},
		{"go install module@version", "", "", "", installed,
			build{Version: "v1.4.0", Commit: "unknown", Date: "unknown"}},
		{"no build information", "", "", "", nil,
			build{Version: "(devel)", Commit: "unknown", Date: "unknown"}},
		{"clean checkout", "", "", "", &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "aa"}, {Key: "vcs.modified", Value: "false"}}},
			build{Version: "(devel)", Commit: "aa", Date: "unknown"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.want.Go, c.want.Platform = runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH
			if got := describeBuild(c.ver, c.commit, c.date, c.info); got != c.want {
				t.Errorf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// `tether version` and `tether --version` print the same line: version,
// commit, date, Go version and platform.
func TestVersionCommandAndFlag(t *testing.T) {
	want := currentBuild().String() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatalf("tether %v: %v", args, err)
		}
		if out.String() != want {
			t.Errorf("tether %v printed %q, want %q", args, out.String(), want)
		}
		for _, part := range []string{"tether " + version, "commit ", "built ", runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH} {
			if !strings.Contains(out.String(), part) {
				t.Errorf("tether %v printed %q, without %q", args, out.String(), part)
			}
		}
	}
}
