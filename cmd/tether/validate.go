package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/tether-mcp/tether/controller/manifest"
	"github.com/tether-mcp/tether/spec"
)

func newValidateCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "validate PATH...",
		Short: "Validate manifest files and directories",
		Long: `validate decodes and checks McpConnection manifests the way tether run does,
without connecting to anything. A PATH that is a directory is walked recursively
and its manifests are the files tether run would read (*.yaml and *.yml, except
status files, hidden files and editor temporaries); a PATH that is a file is
validated whatever its name. Names must be unique across all the PATHs.

It exits 0 and prints a one-line summary when everything is valid, and exits 1
after printing one line per problem on standard error (file:line: document N
(line L): field: what is wrong) and a summary otherwise. Commands on PATH and secret files are checked when tether
connects, not here. valueFrom.secretKeyRef is valid here, as the file may be meant
for a cluster; tether run --dir reports it as invalid (only tether run --kubernetes
reads Secrets).

With -o json it prints one object instead:
  {"valid":bool,"files":N,"documents":N,"errors":[{"file","document","documentLine","line","field","message"}]}
where document is 1-based (0 for a problem with a whole file) and lines are 1-based (0 when unknown).`,
		Example: `  tether validate examples/
  tether validate manifests/github.yaml manifests/remote.yml
  tether validate -o json manifests/ | jq '.errors[].message'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("unknown output format %q (want text or json)", output)
			}
			r := validatePaths(args)
			var err error
			if output == "json" {
				err = r.writeJSON(cmd.OutOrStdout())
			} else {
				err = r.writeText(cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			if err != nil {
				return err
			}
			if !r.valid() {
				return exitCode(1)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

// validation is the outcome of validating some paths.
type validation struct {
	files     int
	documents int
	problems  []*spec.FieldError
	badFiles  int      // files with at least one problem
	empty     []string // directories given that hold no manifest
}

func (v *validation) valid() bool { return len(v.problems) == 0 }

// validatePaths validates files and directory trees. The order of the
// problems follows the order of the paths, then the sorted tree order.
func validatePaths(paths []string) *validation {
	v := &validation{}
	seenFile := map[string]bool{}
	owners := map[string]string{} // metadata.name -> the file that declared it first
	statusOwners := manifest.StatusOwners{}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			v.fileProblem(p, "cannot read: "+manifest.ErrorReason(err).Error())
			continue
		}
		var files []string
		if fi.IsDir() {
			tree, err := manifest.ListTree(p)
			if err != nil {
				v.fileProblem(p, "cannot walk: "+manifest.ErrorReason(err).Error())
				continue
			}
			files = tree.Files
			for dir, err := range tree.Unreadable {
				v.fileProblem(dir, "cannot walk: "+manifest.ErrorReason(err).Error())
			}
			// tether run lists the directory without the file's rules, and
			// says so: a problem here too, as what it would ignore is not.
			for _, file := range slices.Sorted(maps.Keys(tree.BadIgnoreFiles)) {
				v.fileProblem(file, "cannot use this ignore file: "+manifest.ErrorReason(tree.BadIgnoreFiles[file]).Error())
			}
			if len(files) == 0 && len(tree.Unreadable) == 0 {
				v.empty = append(v.empty, p)
			}
		} else {
			files = []string{p}
		}
		for _, f := range files {
			key := filepath.Clean(f)
			if seenFile[key] {
				continue // named twice, or inside a directory also named
			}
			seenFile[key] = true
			// x.yaml and x.yml would share x.status.yaml, as tether run says.
			if err := statusOwners.Claim(key); err != nil {
				v.fileProblem(f, err.Error())
				continue
			}
			v.validateFile(f, owners)
		}
	}
	return v
}

func (v *validation) fileProblem(file, msg string) {
	v.files++
	v.badFiles++
	v.problems = append(v.problems, &spec.FieldError{File: file, Index: -1, Msg: msg})
}

// validateFile decodes one file and checks its names against the files
// validated before it: names are unique across the whole tree.
func (v *validation) validateFile(file string, owners map[string]string) {
	docs, err := manifest.Decode(file)
	if err != nil {
		v.fileProblem(file, "cannot read: "+manifest.ErrorReason(err).Error())
		return
	}
	v.files++
	before := len(v.problems)
	var local []string // names first declared in this file
	for _, d := range docs {
		if d.Index >= 0 {
			v.documents++
		}
		v.problems = append(v.problems, d.Errors...)
		if d.Name == "" {
			continue
		}
		if owner, taken := owners[d.Name]; taken && owner != file {
			v.problems = append(v.problems, manifest.DuplicateError(file, &d, owner))
			continue
		}
		local = append(local, d.Name)
	}
	for _, n := range local {
		owners[n] = file
	}
	if len(v.problems) > before {
		v.badFiles++
	}
}

func (v *validation) writeText(stdout, stderr io.Writer) error {
	for _, d := range v.empty {
		if _, err := fmt.Fprintf(stderr, "warning: %s: no manifests found\n", d); err != nil {
			return err
		}
	}
	summary := fmt.Sprintf("%s, %s", plural(v.files, "file"), plural(v.documents, "document"))
	if v.valid() {
		_, err := fmt.Fprintf(stdout, "%s, all valid\n", summary)
		return err
	}
	for _, p := range v.problems {
		if _, err := fmt.Fprintln(stderr, p.Error()); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(stderr, "%s, %s in %s\n", summary, plural(len(v.problems), "problem"), plural(v.badFiles, "file"))
	return err
}

func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// jsonReport is the stable shape of `tether validate -o json`.
type jsonReport struct {
	Valid     bool        `json:"valid"`
	Files     int         `json:"files"`
	Documents int         `json:"documents"`
	Errors    []jsonError `json:"errors"`
}

type jsonError struct {
	File         string `json:"file"`
	Document     int    `json:"document"`     // 1-based; 0 for a whole-file problem
	DocumentLine int    `json:"documentLine"` // 0 for a whole-file problem
	Line         int    `json:"line"`         // 0 when unknown
	Field        string `json:"field"`
	Message      string `json:"message"`
}

func (v *validation) writeJSON(w io.Writer) error {
	r := jsonReport{Valid: v.valid(), Files: v.files, Documents: v.documents, Errors: []jsonError{}}
	for _, p := range v.problems {
		r.Errors = append(r.Errors, jsonError{
			File: p.File, Document: p.Document(), DocumentLine: p.DocLine, Line: p.Line, Field: p.Field, Message: p.Msg,
		})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
