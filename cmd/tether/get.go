package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/tether-mcp/tether/controller/owner"
	"github.com/tether-mcp/tether/controller/statusview"
)

type getOptions struct {
	dir       string
	statusDir string
	output    string
	selector  string
	watch     bool
	// now is the clock AGE is measured to; tests fix it.
	now func() time.Time
	// watchOpts tune -w; tests shorten them.
	watchOpts statusview.WatchOptions
}

func newGetCmd() *cobra.Command {
	return newGetCmdWith(&getOptions{now: time.Now})
}

func newGetCmdWith(o *getOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get [NAME...]",
		Short: "Show connections and their status",
		Long: `get shows the connections that the manifests under --dir declare, with the
status tether run wrote for them. It reads the manifests and the status files
only, so it works whether tether is running or not (a stopped tether's last
status reads "tether stopped").

Without --dir (and --status-dir), get asks the running tether what it
watches, as kubectl works on the current context: the owner of the current
directory's state directory (.tether), else the owner of the user's default
directory (tether/manifests under the user's configuration directory). It
says on stderr which directory it shows. When neither has a running owner,
get reads the current directory.

Columns:
  NAME        metadata.name
  TRANSPORT   stdio, streamable or sse (from the manifest)
  PHASE       Pending, Connecting, Connected, Degraded, Reconnecting, Idle,
              AuthRequired, Refused, Suspended or Invalid
  TOOLS       tools exposed through the gateway / tools the server has
  AGE         time since the Ready condition last changed status: how long
              the connection has been connected, or how long it has not
  MESSAGE     the Ready condition's message
  -o wide adds ATTEMPTS (failed attempts since the last success), ENDPOINT
  (command and arguments, or URL; never env or header values), SANDBOX (what
  confines the server: landlock fs+net) and LAST ERROR.

A manifest document tether has not reported on yet shows phase Pending with
Ready status Unknown (reason NoStatus); its AGE counts from the manifest
file's modification time. A document that does not decode shows phase
Invalid and its first error.

-o json prints a kubectl-style List, {"apiVersion":"v1","kind":"List",
"items":[...]}, whose items are status documents as the status files hold
them; -o yaml prints the same List in YAML. With exactly one NAME, as
kubectl does, the status document is printed alone, not in a List. With
NAMEs, only those are shown; a NAME no manifest declares is an error (exit 1) after the others
are printed. -l selects by the manifests' labels (documents that do not
decode have no labels: they are left out, with a warning).

-w prints the table, then a row each time a connection's status changes,
until interrupted. With -o json or -o yaml it prints each changed status
document on its own (YAML documents separated by ---).`,
		Example: `  # every connection under the current directory
  tether get

  # two connections, with their endpoints and last errors
  tether get --dir ./manifests github memory -o wide

  # what tether run --status-dir wrote, for connections labelled team=infra
  tether get --dir /etc/tether --status-dir /var/lib/tether/status -l team=infra

  # follow phase changes as they happen
  tether get -w

  # names of connections that are not Connected
  tether get -o json | jq -r '.items[] | select(.status.phase != "Connected") | .metadata.name'`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: o.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dir, "dir", "", "directory of McpConnection manifests, as given to tether run --dir (default: what the running tether watches, else the current directory)")
	f.StringVar(&o.statusDir, "status-dir", "", "where tether run --status-dir writes status files (default: beside the manifests)")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table, wide, yaml or json")
	f.StringVarP(&o.selector, "selector", "l", "", "only connections whose manifest labels match this selector (e.g. team=infra,env!=dev)")
	f.BoolVarP(&o.watch, "watch", "w", false, "after printing, keep printing a row whenever a connection's status changes")
	_ = cmd.MarkFlagDirname("dir")
	_ = cmd.MarkFlagDirname("status-dir")
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		out := make([]string, len(statusview.Formats))
		for i, f := range statusview.Formats {
			out[i] = string(f)
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

func (o *getOptions) run(ctx context.Context, names []string, stdout, stderr io.Writer) error {
	format, err := statusview.ParseFormat(o.output)
	if err != nil {
		return err
	}
	sel := statusview.Selection{Names: names}
	if o.selector != "" {
		if len(names) > 0 {
			return errors.New("NAME arguments and --selector exclude each other")
		}
		if sel.Selector, err = labels.Parse(o.selector); err != nil {
			return fmt.Errorf("--selector: %w", err)
		}
	}
	if o.dir == "" && o.statusDir == "" {
		o.dir, o.statusDir = findOwned(ctx, stderr)
	}
	o.dir = cmp.Or(o.dir, ".")
	src := statusview.Source{Dir: o.dir, StatusDir: o.statusDir}
	if o.watch {
		return o.runWatch(ctx, src, sel, format, stdout, stderr)
	}

	snap, err := statusview.Load(src)
	if err != nil {
		return fmt.Errorf("--dir %w", err)
	}
	for _, w := range snap.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	conns, selErr := statusview.Select(snap, sel, o.dir)
	if hidden := statusview.Unmatchable(snap, sel); len(hidden) > 0 {
		fmt.Fprintf(stderr, "warning: not matched, their manifests do not decode so their labels are unknown: %s (tether validate %s)\n",
			strings.Join(hidden, ", "), o.dir)
	}
	switch format {
	case statusview.FormatTable, statusview.FormatWide:
		if len(conns) == 0 {
			if selErr == nil {
				fmt.Fprintln(stderr, noneFound(o.dir, o.selector))
			}
		} else if err := statusview.NewTable(stdout, format == statusview.FormatWide, o.now).Write(conns, true); err != nil {
			return err
		}
	case statusview.FormatJSON, statusview.FormatYAML:
		write := statusview.WriteJSON
		if format == statusview.FormatYAML {
			write = statusview.WriteYAML
		}
		// As kubectl does: one NAME prints that object alone (nothing when
		// it is unknown), anything else a List.
		if len(names) == 1 {
			if c, ok := statusview.Object(conns); ok {
				err = write(stdout, c.Status)
			}
		} else {
			err = write(stdout, statusview.NewList(conns))
		}
	}
	if err != nil {
		return err
	}
	return selErr
}

// findOwned is what tether get shows when told no directory: what the
// owner of the current directory's state directory watches, else the owner
// of the user's default directory; "" when neither answers. It says which
// on stderr.
func findOwned(ctx context.Context, stderr io.Writer) (dir, statusDir string) {
	candidates := []string{stateDirPath("", "", ".")}
	if def, err := owner.DefaultDir(); err == nil {
		candidates = append(candidates, stateDirPath("", "", def))
	}
	for _, sd := range candidates {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		rec, err := owner.Query(qctx, sd)
		cancel()
		if err != nil || rec.Dir == "" {
			continue
		}
		where := rec.Dir
		if rec.StatusDir != "" {
			where += " (status in " + rec.StatusDir + ")"
		}
		fmt.Fprintf(stderr, "Showing %s, watched by tether pid %d.\n", where, rec.PID)
		return rec.Dir, rec.StatusDir
	}
	return "", ""
}

func noneFound(dir, selector string) string {
	if selector != "" {
		return fmt.Sprintf("No connections in %s match %s.", dir, selector)
	}
	return fmt.Sprintf("No connections found in %s.", dir)
}

func (o *getOptions) runWatch(ctx context.Context, src statusview.Source, sel statusview.Selection, format statusview.Format, stdout, stderr io.Writer) error {
	// Like kubectl -w: a missing directory or a NAME that does not exist
	// is an error up front; later, the tree may come and go.
	snap, err := statusview.Load(src)
	if err != nil {
		return fmt.Errorf("--dir %w", err)
	}
	if _, err := statusview.Select(snap, sel, o.dir); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	table := statusview.NewTable(stdout, format == statusview.FormatWide, o.now)
	header := true
	first := true
	opts := o.watchOpts
	opts.Warn = func(msg string) { fmt.Fprintln(stderr, "warning:", msg) }
	return statusview.Watch(ctx, src, sel, opts, func(changed []statusview.Connection) error {
		if first && len(changed) == 0 {
			fmt.Fprintln(stderr, noneFound(o.dir, o.selector))
		}
		first = false
		switch format {
		case statusview.FormatJSON:
			for _, c := range changed {
				if err := statusview.WriteJSON(stdout, c.Status); err != nil {
					return err
				}
			}
		case statusview.FormatYAML:
			for _, c := range changed {
				if _, err := io.WriteString(stdout, "---\n"); err != nil {
					return err
				}
				if err := statusview.WriteYAML(stdout, c.Status); err != nil {
					return err
				}
			}
		default:
			if len(changed) == 0 {
				return nil
			}
			err := table.Write(changed, header)
			header = false
			return err
		}
		return nil
	})
}

// completeNames completes NAME arguments from the manifests under --dir:
// reading them is cheap, and it needs no running tether.
func (o *getOptions) completeNames(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	snap, err := statusview.Load(statusview.Source{Dir: cmp.Or(o.dir, "."), StatusDir: o.statusDir})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	given := map[string]bool{}
	for _, a := range args {
		given[a] = true
	}
	var out []string
	for _, c := range snap.Connections {
		if !given[c.Name] && strings.HasPrefix(c.Name, toComplete) {
			given[c.Name] = true
			out = append(out, c.Name+"\t"+string(c.Status.Status.Phase))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
