package statusview

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/tether-mcp/tether/controller/boundedfile"
	"github.com/tether-mcp/tether/controller/manifest"
	"github.com/tether-mcp/tether/controller/statusfile"
	"github.com/tether-mcp/tether/spec"
)

// Source is the tree tether run watches: Dir as given to --dir, StatusDir as
// given to --status-dir ("" when the status files sit beside the manifests).
type Source struct {
	Dir       string
	StatusDir string
}

// Reasons of the conditions that Load makes up for a connection that has no
// status document yet.
const (
	// ReasonNoStatus: tether has not written a status for this connection
	// (it does not run, has not reached it yet, or its -l does not select it).
	ReasonNoStatus = "NoStatus"
	// ReasonManifestInvalid matches the reason tether itself writes.
	ReasonManifestInvalid = spec.ReasonManifestInvalid
)

// MessageNoStatus is the Ready message of a connection without status.
const MessageNoStatus = "no status written yet (is tether run watching this directory?)"

// Connection is one connection as `tether get` shows it: a manifest
// document joined with its status document.
type Connection struct {
	Name string
	// Manifest is the file that declares the connection.
	Manifest string
	// Labels are the manifest's labels (nil for a document that does not decode).
	Labels map[string]string
	// Spec is the decoded manifest spec; nil when the document is invalid.
	Spec *spec.Spec
	// Status is the connection's status document. When Observed is false
	// tether has written none, and Status is made up from the manifest:
	// phase Invalid for a document that does not decode, else phase Pending
	// with a Ready condition of status Unknown and reason NoStatus, whose
	// lastTransitionTime is the manifest file's modification time.
	Status   spec.StatusDocument
	Observed bool
	// Duplicate is set when another file declared the name first: tether
	// run refuses this document (phase Invalid), and this says why.
	Duplicate string
}

// Ready returns the connection's Ready condition, or nil.
func (c Connection) Ready() *spec.Condition {
	for i := range c.Status.Status.Conditions {
		if c.Status.Status.Conditions[i].Type == spec.ConditionReady {
			return &c.Status.Status.Conditions[i]
		}
	}
	return nil
}

// Transport is stdio, streamable or sse; "" when the manifest is invalid.
func (c Connection) Transport() string {
	if c.Spec == nil {
		return ""
	}
	return c.Spec.TransportName()
}

// Endpoint is what the connection reaches: the command and its arguments,
// the URL with credential-looking parts masked, or a container's image. Never an env or header
// value.
func (c Connection) Endpoint() string {
	switch {
	case c.Spec == nil:
		return ""
	case c.Spec.Stdio != nil:
		return commandLine(c.Spec.Stdio.Command, c.Spec.Stdio.Args)
	case c.Spec.HTTP != nil:
		return maskURL(c.Spec.HTTP.URL)
	case c.Spec.Container != nil:
		return "container " + c.Spec.Container.Image
	}
	return ""
}

// Snapshot is one reading of a tree.
type Snapshot struct {
	// Connections, sorted by name (then manifest path).
	Connections []Connection
	// Warnings name what could not be shown: unreadable files, documents
	// without a name. They never hold a secret: the decoder's errors do not.
	Warnings []string
}

// Load reads every manifest under src.Dir and its status file. A manifest
// document that does not decode but whose name can be read is still a
// connection (phase Invalid unless tether reported otherwise); one whose
// name cannot be read is a warning. Status documents whose name no manifest
// declares any longer are left out: the manifests say what exists.
func Load(src Source) (Snapshot, error) {
	fi, err := os.Stat(src.Dir)
	if err != nil || !fi.IsDir() {
		return Snapshot{}, fmt.Errorf("%s: not a directory", src.Dir)
	}
	tree, err := manifest.ListTree(src.Dir)
	if err != nil {
		return Snapshot{}, fmt.Errorf("listing %s: %w", src.Dir, err)
	}
	var snap Snapshot
	// tether run lists these directories without the file's rules too.
	for _, f := range slices.Sorted(maps.Keys(tree.BadIgnoreFiles)) {
		snap.warnf("%s: cannot use this ignore file: %v", f, manifest.ErrorReason(tree.BadIgnoreFiles[f]))
	}
	owners := map[string]string{} // name → the first file (in path order) that declares it, as tether run decides
	for _, file := range tree.Files {
		snap.loadFile(src, file, owners)
	}
	sort.SliceStable(snap.Connections, func(i, j int) bool {
		a, b := &snap.Connections[i], &snap.Connections[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Manifest < b.Manifest
	})
	return snap, nil
}

func (s *Snapshot) warnf(format string, args ...any) {
	s.Warnings = append(s.Warnings, fmt.Sprintf(format, args...))
}

func (s *Snapshot) loadFile(src Source, file string, owners map[string]string) {
	data, fi, err := boundedfile.Read(file, spec.MaxFileSize)
	if err != nil {
		s.warnf("%s: cannot read: %v", file, manifest.ErrorReason(err))
		return
	}
	mtime := fi.ModTime()
	statusPath := statusfile.Path(src.Dir, src.StatusDir, file)
	status, err := readStatus(statusPath)
	if err != nil {
		s.warnf("%s: %v (showing its connections as if it had none)", statusPath, err)
	}
	for _, d := range spec.DecodeFile(file, data) {
		if d.Name == "" {
			if len(d.Errors) > 0 {
				s.warnf("%s (not shown: it has no name)", d.Errors[0].Error())
			}
			continue
		}
		c := Connection{Name: d.Name, Manifest: file}
		if d.Conn != nil {
			c.Labels = d.Conn.Metadata.Labels
			c.Spec = &d.Conn.Spec
		}
		if owner, taken := owners[d.Name]; taken && owner != file {
			c.Duplicate = manifest.DuplicateError(file, &d, owner).Error()
		} else {
			owners[d.Name] = file
		}
		if doc, ok := status[d.Name]; ok {
			c.Status, c.Observed = doc, true
		} else {
			c.Status = unobserved(d, c.Duplicate, mtime)
		}
		s.Connections = append(s.Connections, c)
	}
}

// unobserved makes up the status of a document tether has not reported on:
// Invalid when it does not decode or its name is taken (duplicate is then
// why), else Pending with reason NoStatus.
func unobserved(d spec.Document, duplicate string, mtime time.Time) spec.StatusDocument {
	doc := spec.StatusDocument{
		APIVersion: spec.APIVersion,
		Kind:       spec.Kind,
		Metadata:   spec.ObjectMeta{Name: d.Name},
	}
	since := mtime.UTC().Truncate(time.Second)
	switch {
	case d.Conn == nil:
		msg := "manifest invalid"
		if len(d.Errors) > 0 {
			msg = d.Errors[0].Error()
		}
		doc.Status = spec.InvalidStatus(msg, since)
	case duplicate != "":
		doc.Status = spec.InvalidStatus(duplicate, since)
	default:
		doc.Status = spec.ConnectionStatus{
			Phase: spec.PhasePending,
			Conditions: []spec.Condition{
				{Type: spec.ConditionReady, Status: spec.ConditionUnknown, Reason: ReasonNoStatus, Message: MessageNoStatus, LastTransitionTime: since},
			},
		}
	}
	return doc
}

// readStatus reads a status file into its documents by name. A missing
// file is no error: tether has not written it yet.
func readStatus(path string) (map[string]spec.StatusDocument, error) {
	docs, err := statusfile.Read(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return docs, fmt.Errorf("cannot read status file: %v", manifest.ErrorReason(err))
	}
	return docs, nil
}

// NotFoundError lists the names asked for that no manifest declares.
type NotFoundError struct {
	Names []string
	Dir   string
}

func (e *NotFoundError) Error() string {
	quoted := make([]string, len(e.Names))
	for i, n := range e.Names {
		quoted[i] = fmt.Sprintf("%q", n)
	}
	noun := "connection"
	if len(e.Names) > 1 {
		noun = "connections"
	}
	return fmt.Sprintf("%s %s not found in %s", noun, strings.Join(quoted, ", "), e.Dir)
}

// Selection says which connections to show: those named (all when Names is
// empty) and whose manifest labels match Selector (nil: all).
type Selection struct {
	Names    []string
	Selector labels.Selector
}

// Select returns the connections of snap that sel chooses, in snap's order.
// A document that does not decode has no labels: a selector matches it only
// if it matches an empty label set (see Unmatchable). Names that no
// manifest declares are returned as a *NotFoundError beside the
// connections that were found.
func Select(snap Snapshot, sel Selection, dir string) ([]Connection, error) {
	want := map[string]bool{}
	for _, n := range sel.Names {
		want[n] = true
	}
	var out []Connection
	for _, c := range snap.Connections {
		if len(want) > 0 && !want[c.Name] {
			continue
		}
		if sel.Selector != nil && !sel.Selector.Matches(labels.Set(c.Labels)) {
			continue
		}
		out = append(out, c)
	}
	var missing []string
	seen := map[string]bool{}
	for _, n := range sel.Names {
		if !seen[n] && !declared(snap, n) {
			missing = append(missing, n)
		}
		seen[n] = true
	}
	if len(missing) > 0 {
		return out, &NotFoundError{Names: missing, Dir: dir}
	}
	return out, nil
}

// Unmatchable returns the names of the connections that sel's selector
// leaves out only because their manifest document does not decode, so its
// labels are unknown. Showing them would be a guess; hiding them silently
// would hide a broken manifest.
func Unmatchable(snap Snapshot, sel Selection) []string {
	if sel.Selector == nil || sel.Selector.Matches(labels.Set(nil)) {
		return nil
	}
	var out []string
	for _, c := range snap.Connections {
		if c.Spec == nil {
			out = append(out, c.Name)
		}
	}
	return out
}

func declared(snap Snapshot, name string) bool {
	for _, c := range snap.Connections {
		if c.Name == name {
			return true
		}
	}
	return false
}
