package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tether-mcp/tether/controller/boundedfile"
	"github.com/tether-mcp/tether/controller/diff"
	"github.com/tether-mcp/tether/controller/exposure"
	"github.com/tether-mcp/tether/controller/manifest"
	"github.com/tether-mcp/tether/controller/state"
)

type diffOptions struct {
	dir, statusDir, stateDir string
	against                  string
	output                   string
	gateway, gatewayToken    string
	maxNameLength            int
	maxCatchAllTemplates     int
	maxTemplatesPerPrefix    int
	maxStateFileSize         int64
}

func newDiffCmd() *cobra.Command {
	o := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff [PATH...|-]",
		Short: "Show what a change to the manifests will do, before it lands",
		Long: `diff compares the desired state that the manifests would produce with what tether
has now, with tether run's own rules, and says for each connection whether it is
added, removed, reconnected (and the fields that force it), updated in place
(and the fields) or unchanged; the tools, prompts and resources agents gain and
lose through the gateway; the name collisions the change makes or resolves; and
the invalid documents, as tether validate reports them.

The new state: PATH... (files and directories, read as tether run reads them;
- reads one manifest file from stdin, placed in --dir), else the tree under --dir.

What it is compared with:
  --against REF   the tree under --dir at a git revision (as committed; the
                  revision's .tetherignore applies), or with a directory, that tree
  (default)       what the tether running on --dir has: the last valid specs in
                  its state directory (--state-dir, default .tether under
                  --status-dir, else under --dir), who holds contested names
                  from its status files; when there is no state directory, the
                  manifests under --dir as they are now
What each server offers comes from the catalogs the state directory keeps
(OnDemand servers) and, with --gateway URL, from what the running gateway lists.

Exit status: 0 no change, 1 changes, 2 invalid documents or an error (as kubectl
diff). -o json|yaml prints a Diff document (docs/contract.md §6a). Colour only on a
terminal, never with NO_COLOR set.`,
		Example: `  tether diff --dir manifests
  tether diff --dir manifests --against origin/main
  tether diff --dir manifests --gateway http://127.0.0.1:8808/mcp -o json
  kubectl kustomize overlays/prod | tether diff --dir manifests -`,
		Args: func(c *cobra.Command, args []string) error {
			// stdin holds one file: read twice, the second would be empty.
			stdin := 0
			for _, a := range args {
				if a == "-" {
					stdin++
				}
			}
			if stdin > 1 {
				return diffUsageExit(c, fmt.Errorf("- (stdin) given %d times; it can be read once", stdin))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := runDiff(cmd.Context(), o, args)
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "error:", err)
				return exitCode(2)
			}
			switch o.output {
			case "json":
				err = diff.WriteJSON(cmd.OutOrStdout(), r)
			case "yaml":
				err = diff.WriteYAML(cmd.OutOrStdout(), r)
			default:
				err = diff.Text(cmd.OutOrStdout(), r, colorOutput(cmd.OutOrStdout()))
			}
			switch {
			case err != nil:
				fmt.Fprintln(cmd.ErrOrStderr(), "error:", err)
				return exitCode(2)
			case len(r.Invalid) > 0:
				return exitCode(2)
			case r.Changed():
				return exitCode(1)
			}
			return nil
		},
	}
	// Exit status 1 means "changes": a usage error must not read as one
	// (docs/contract.md §6a).
	cmd.SetFlagErrorFunc(diffUsageExit)
	f := cmd.Flags()
	f.StringVar(&o.dir, "dir", ".", "the manifest directory tether run watches")
	f.StringVar(&o.statusDir, "status-dir", "", "tether run's --status-dir, if it has one")
	f.StringVar(&o.stateDir, "state-dir", "", "tether run's --state-dir (default: "+state.DirName+" under --status-dir, else under --dir)")
	f.StringVar(&o.against, "against", "", "compare with the tree under --dir at this git revision, or with this directory, instead of the running tether")
	f.StringVarP(&o.output, "output", "o", "text", "output format: text, json or yaml")
	f.StringVar(&o.gateway, "gateway", "", "the running gateway's URL (http://127.0.0.1:8808/mcp), to learn what the servers that are not OnDemand offer; empty: not asked")
	f.StringVar(&o.gatewayToken, "gateway-token-file", "", "file holding the gateway's bearer token (tether run --auth-token-file)")
	f.IntVar(&o.maxNameLength, "max-name-length", 128, "tether run's --max-name-length")
	f.IntVar(&o.maxCatchAllTemplates, "max-catch-all-templates", exposure.DefaultMaxCatchAllTemplates, "tether run's --max-catch-all-templates")
	f.IntVar(&o.maxTemplatesPerPrefix, "max-templates-per-prefix", exposure.DefaultMaxTemplatesPerPrefix, "tether run's --max-templates-per-prefix")
	f.Int64Var(&o.maxStateFileSize, "max-state-file-size", state.DefaultMaxFileSize, "tether run's --max-state-file-size")
	return cmd
}

func runDiff(ctx context.Context, o *diffOptions, args []string) (*diff.Result, error) {
	switch o.output {
	case "text", "json", "yaml":
	default:
		return nil, fmt.Errorf("unknown output format %q (want text, json or yaml)", o.output)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	newFiles, err := newTree(o, args)
	if err != nil {
		return nil, err
	}
	base, err := baseState(ctx, o, len(args) > 0)
	if err != nil {
		return nil, err
	}
	if o.gateway != "" {
		token := ""
		if o.gatewayToken != "" {
			b, _, err := boundedfile.Read(o.gatewayToken, 64<<10)
			if err != nil {
				return nil, fmt.Errorf("--gateway-token-file %s: %w", o.gatewayToken, manifest.ErrorReason(err))
			}
			token = strings.TrimSpace(string(b))
		}
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		l, err := diff.ListGateway(lctx, o.gateway, token)
		cancel()
		if err != nil {
			return nil, err
		}
		base.AddListing(l, o.exposureOptions())
		base.Against += " and its gateway at " + o.gateway
	}
	return diff.Compute(base, newFiles, o.exposureOptions()), nil
}

// exposureOptions are tether run's gateway settings that diff is told.
func (o *diffOptions) exposureOptions() diff.Options {
	return diff.Options{MaxNameLength: o.maxNameLength, MaxCatchAllTemplates: o.maxCatchAllTemplates, MaxTemplatesPerPrefix: o.maxTemplatesPerPrefix}
}

// newTree reads the new state: PATH... or - when given, else --dir.
func newTree(o *diffOptions, args []string) ([]manifest.File, error) {
	if len(args) > 0 {
		return diff.ReadPaths(args, os.Stdin, o.dir)
	}
	files, _, err := manifest.ListFiles(o.dir)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", o.dir, err)
	}
	return files, nil
}

// baseState is what the new state is compared with (see the command's help).
func baseState(ctx context.Context, o *diffOptions, havePaths bool) (diff.Base, error) {
	if o.against != "" {
		if fi, err := os.Stat(o.against); err == nil && fi.IsDir() {
			// Another version of the tree under --dir: named as its files,
			// so that only what differs in them shows.
			files, _, err := manifest.ListFilesAs(o.against, filepath.Clean(o.dir))
			if err != nil {
				return diff.Base{}, fmt.Errorf("listing %s: %w", o.against, err)
			}
			return diff.FromFiles("directory "+o.against, files, "", ""), nil
		}
		files, err := diff.ReadRevision(ctx, o.dir, o.against)
		if err != nil {
			return diff.Base{}, err
		}
		return diff.FromFiles("git revision "+o.against+" of "+o.dir, files, "", ""), nil
	}
	b, problems, err := diff.FromState(stateDirPath(o.stateDir, o.statusDir, o.dir), o.dir, o.statusDir, o.maxStateFileSize)
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, "warning:", p)
	}
	if errors.Is(err, diff.ErrNoState) {
		if !havePaths {
			return diff.Base{}, fmt.Errorf("nothing to compare %s with: no tether has run on it (%v); name the new manifests (PATH... or -) or --against REF", o.dir, err)
		}
		files, _, err := manifest.ListFiles(o.dir)
		if err != nil {
			return diff.Base{}, fmt.Errorf("listing %s: %w", o.dir, err)
		}
		return diff.FromFiles("the manifests under "+o.dir+" (no tether has run there)", files, o.dir, o.statusDir), nil
	}
	return b, err
}

// diffUsageExit says a usage error of tether diff on stderr and exits 2
// (1 would mean "changes").
func diffUsageExit(cmd *cobra.Command, err error) error {
	fmt.Fprintln(cmd.ErrOrStderr(), "error:", err)
	return exitCode(2)
}

// colorOutput: colour on a terminal only, and never with NO_COLOR set
// (no-color.org).
func colorOutput(w any) bool {
	if _, ok := os.LookupEnv("NO_COLOR"); ok {
		return false
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
