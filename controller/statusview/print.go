package statusview

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/tether-mcp/tether/spec"
)

// Format is an output format of `tether get -o`.
type Format string

const (
	FormatTable Format = "table"
	FormatWide  Format = "wide"
	FormatYAML  Format = "yaml"
	FormatJSON  Format = "json"
)

// Formats lists the output formats, for help and shell completion.
var Formats = []Format{FormatTable, FormatWide, FormatYAML, FormatJSON}

// ParseFormat checks an -o value; "" is the table.
func ParseFormat(s string) (Format, error) {
	if s == "" {
		return FormatTable, nil
	}
	for _, f := range Formats {
		if Format(s) == f {
			return f, nil
		}
	}
	return "", fmt.Errorf("unknown output format %q (want table, wide, yaml or json)", s)
}

// What the table prints for a value that is absent, as kubectl does.
const (
	none    = "<none>"
	unknown = "<unknown>"
)

// Table prints connections as kubectl prints objects: a header, then one
// row per connection, columns aligned with three spaces between them. It
// remembers column widths across writes (as kubectl's tabwriter fork does),
// so that rows a watch prints later stay aligned with the header; a wider
// value widens its column from then on.
type Table struct {
	w      io.Writer
	wide   bool
	now    func() time.Time
	widths []int
}

// columnGap is the space between columns (kubectl's tabwriter padding).
const columnGap = 3

// NewTable returns a table that writes to w; wide adds the ATTEMPTS,
// ENDPOINT, SANDBOX and LAST ERROR columns. now gives the time AGE is measured to.
func NewTable(w io.Writer, wide bool, now func() time.Time) *Table {
	return &Table{w: w, wide: wide, now: now}
}

// Columns returns the column names of the table.
func (t *Table) Columns() []string {
	if t.wide {
		return []string{"NAME", "TRANSPORT", "PHASE", "TOOLS", "AGE", "ATTEMPTS", "ENDPOINT", "SANDBOX", "MESSAGE", "LAST ERROR"}
	}
	return []string{"NAME", "TRANSPORT", "PHASE", "TOOLS", "AGE", "MESSAGE"}
}

// Write prints the rows of conns, after the header when header is true.
func (t *Table) Write(conns []Connection, header bool) error {
	var rows [][]string
	if header {
		rows = append(rows, t.Columns())
	}
	now := t.now()
	for i := range conns {
		rows = append(rows, t.Row(&conns[i], now))
	}
	if t.widths == nil {
		t.widths = make([]int, len(t.Columns()))
	}
	for _, r := range rows {
		for i, c := range r {
			t.widths[i] = max(t.widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		var line strings.Builder
		for i, c := range r {
			line.WriteString(c)
			if i < len(r)-1 {
				line.WriteString(strings.Repeat(" ", t.widths[i]-utf8.RuneCountInString(c)+columnGap))
			}
		}
		// An empty last cell (no message) leaves no trailing blanks.
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(t.w, b.String())
	return err
}

// Row returns the cells of one connection.
func (t *Table) Row(c *Connection, now time.Time) []string {
	st := &c.Status.Status
	transport := c.Transport()
	if transport == "" {
		transport = unknown
	}
	tools := none
	if st.Tools != nil {
		// Like kubectl's READY 1/2: exposed through the gateway of the total.
		tools = fmt.Sprintf("%d/%d", st.Tools.Exposed, st.Tools.Count)
	}
	phase := string(st.Phase)
	if phase == "" {
		phase = unknown
	}
	age, msg := unknown, ""
	if r := c.Ready(); r != nil {
		if !r.LastTransitionTime.IsZero() {
			age = duration.HumanDuration(now.Sub(r.LastTransitionTime))
		}
		msg = r.Message
	}
	row := []string{c.Name, transport, phase, tools, age}
	if t.wide {
		endpoint := c.Endpoint()
		if endpoint == "" {
			endpoint = none
		}
		lastErr := st.LastError
		if lastErr == "" {
			lastErr = none
		}
		sandbox := st.Sandbox
		if sandbox == "" {
			sandbox = none
		}
		row = append(row, strconv.Itoa(st.Attempt), endpoint, sandbox, msg, lastErr)
	} else {
		row = append(row, msg)
	}
	for i := range row {
		row[i] = cell(row[i])
	}
	return row
}

// cell keeps a value on one line and out of the tab stops (an error
// message may hold newlines or tabs), and keeps a server's control
// characters (ANSI or OSC escapes in its name or errors) away from the
// terminal, as kubectl does.
func cell(s string) string {
	if strings.ContainsAny(s, "\t\r\n") {
		s = strings.Join(strings.Fields(s), " ")
	}
	if strings.IndexFunc(s, unicode.IsControl) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}

// List is a kubectl-style List of status documents, what -o json and
// -o yaml print.
type List struct {
	APIVersion string                `json:"apiVersion"`
	Kind       string                `json:"kind"`
	Items      []spec.StatusDocument `json:"items"`
}

// Object returns the one connection a single NAME asks for: the document
// tether runs when another file declares the name too (a duplicate is
// refused), else the first.
func Object(conns []Connection) (Connection, bool) {
	for _, c := range conns {
		if c.Duplicate == "" {
			return c, true
		}
	}
	if len(conns) > 0 {
		return conns[0], true
	}
	return Connection{}, false
}

// NewList wraps the status documents of conns in a List.
func NewList(conns []Connection) List {
	l := List{APIVersion: "v1", Kind: "List", Items: make([]spec.StatusDocument, 0, len(conns))}
	for _, c := range conns {
		l.Items = append(l.Items, c.Status)
	}
	return l
}

// WriteJSON writes v as indented JSON (four spaces, as kubectl does).
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "    ")
	return enc.Encode(v)
}

// WriteYAML writes v as YAML in struct field order, so that a status
// document reads as it does in its status file.
func WriteYAML(w io.Writer, v any) error {
	b, err := spec.RenderYAML(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// commandLine joins a command and its arguments for people, quoting what a
// shell would split or expand.
func commandLine(command string, args []string) string {
	parts := make([]string, 0, 1+len(args))
	for _, a := range append([]string{command}, args...) {
		parts = append(parts, ShellQuote(a))
	}
	return strings.Join(parts, " ")
}

// ShellQuote quotes s as a POSIX shell word when a shell would split or
// expand it, for commands printed for people to paste.
func ShellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\r\n'\"\\$`!*?[]{}()<>|&;#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// maskURL hides a URL's password and the values of query parameters whose
// names look like credentials (?api_key=…): a manifest may carry a secret
// there even though it should not.
func maskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparsable URL>"
	}
	if u.RawQuery != "" {
		q := u.Query()
		masked := false
		for k, vs := range q {
			if credentialWord(k) {
				for i := range vs {
					vs[i] = "xxxxx"
				}
				masked = true
			}
		}
		if masked {
			u.RawQuery = q.Encode()
		}
	}
	return u.Redacted()
}

// credentialWord reports whether a name looks like it names a credential,
// by the words docs/contract.md §6 lists for tether import.
func credentialWord(name string) bool {
	n := strings.ToUpper(name)
	for _, w := range []string{"TOKEN", "SECRET", "KEY", "PASSWORD", "CREDENTIAL", "AUTH"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}
