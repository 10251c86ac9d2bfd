package diff

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tether-mcp/tether/controller/exposure"

	"go.yaml.in/yaml/v3"
)

// WriteJSON writes r as the Diff document, indented.
func WriteJSON(w io.Writer, r *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteYAML writes r as the Diff document in YAML.
func WriteYAML(w io.Writer, r *Result) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		return err
	}
	out, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// Text writes r for people, in the manner of kubectl diff: a line per
// connection marked + (added), - (removed), ~ (reconnect, in place) or
// blank (unchanged), the fields that force a reconnect or apply in place,
// and below it the names agents gain (+) and lose (-); then collisions and
// invalid documents. color adds ANSI colours (a terminal only).
func Text(w io.Writer, r *Result, color bool) error {
	p := &printer{w: w, color: color}
	p.line("", "diff against %s", r.Against)
	for _, c := range r.Connections {
		mark, col := " ", ""
		switch c.Change {
		case Added:
			mark, col = "+", green
		case Removed:
			mark, col = "-", red
		case Reconnect, InPlace:
			mark, col = "~", yellow
		}
		head := fmt.Sprintf("%s %-10s %s", mark, c.Change, c.Name)
		if c.Manifest != "" {
			head += "  (" + shown(c.Manifest) + ")"
		}
		p.line(col, "%s", head)
		if len(c.ReconnectFields) > 0 {
			p.line("", "    reconnects for: %s", strings.Join(c.ReconnectFields, ", "))
		}
		if len(c.InPlaceFields) > 0 {
			p.line("", "    in place: %s", strings.Join(c.InPlaceFields, ", "))
		}
		switch {
		case c.ManifestError != "" && c.Invalid:
			p.line(red, "    invalid, so it does not run (phase Invalid): %s", c.ManifestError)
		case c.ManifestError != "":
			p.line(red, "    invalid, so its last valid spec is kept: %s", c.ManifestError)
		}
		for _, k := range []struct {
			label string
			n     *Names
		}{{"tool", c.Tools}, {"prompt", c.Prompts}, {"resource", c.Resources}, {"resource template", c.ResourceTemplates}} {
			if k.n == nil {
				continue
			}
			for _, a := range k.n.Added {
				p.line(green, "    + %s %s", k.label, shown(a))
			}
			for _, a := range k.n.Removed {
				p.line(red, "    - %s %s", k.label, shown(a))
			}
		}
		if c.Catalog != "known" && c.Change != Unchanged && !c.Invalid {
			switch {
			case c.Catalog == "unknown" && c.Change == Removed:
				p.line("", "    (what its server offered is not known: names it stops exposing are not shown)")
			case c.Catalog == "unknown":
				p.line("", "    (what its server offers is not known yet: names it will expose are not shown)")
			case c.Catalog == "partial":
				p.line("", "    (tether knows part of what its server offers: names its filter hides now, or its resources, are not shown)")
			}
		}
	}
	if len(r.CollisionsMade) > 0 {
		p.line("", "collisions made:")
		for _, c := range r.CollisionsMade {
			p.line(red, "  ! %s: %s loses it to %s", shown(c.Name), c.Loser, c.Owner)
		}
	}
	if len(r.CollisionsResolved) > 0 {
		p.line("", "collisions resolved:")
		for _, c := range r.CollisionsResolved {
			p.line(green, "  ✓ %s: %s no longer loses it to %s", shown(c.Name), c.Loser, c.Owner)
		}
	}
	if len(r.Invalid) > 0 {
		p.line("", "invalid documents:")
		for _, e := range r.Invalid {
			p.line(red, "  %s", e)
		}
	}
	s := r.Summary
	p.line("", "%d added, %d removed, %d reconnect, %d in place, %d unchanged; %d invalid", s.Added, s.Removed, s.Reconnect, s.InPlace, s.Unchanged, s.Invalid)
	return p.err
}

// shown is s as the text output prints it: quoted, with its control and
// bidirectional characters escaped, when it holds any. Resource URIs and
// templates reach the gateway as their servers wrote them (only tool and
// prompt names are refused for such characters, exposure.NameProblem), and
// an ESC or U+202E must not drive or reorder the terminal that shows them.
func shown(s string) string {
	for _, r := range s {
		if unicode.IsControl(r) || exposure.IsBidiControl(r) || r == utf8.RuneError {
			return strconv.Quote(s)
		}
	}
	return s
}

const (
	red    = "\x1b[31m"
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	reset  = "\x1b[0m"
)

type printer struct {
	w     io.Writer
	color bool
	err   error
}

func (p *printer) line(col, format string, args ...any) {
	if p.err != nil {
		return
	}
	s := fmt.Sprintf(format, args...)
	if p.color && col != "" {
		s = col + s + reset
	}
	_, p.err = fmt.Fprintln(p.w, s)
}
