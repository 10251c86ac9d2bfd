package importer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Format is a client configuration format.
type Format string

const (
	// FormatMCPServers is {"mcpServers": {...}}: Claude Desktop, Cursor,
	// Claude Code's .mcp.json and most other clients.
	FormatMCPServers Format = "mcpServers"
	// FormatVSCode is {"servers": {...}, "inputs": [...]} of VS Code's
	// mcp.json, also found as {"mcp": {"servers": ...}} in settings.json.
	FormatVSCode Format = "servers"
)

// Config is a parsed client configuration.
type Config struct {
	Format Format
	// Servers in the order the file lists them.
	Servers []RawServer
	// Inputs are VS Code's prompted values, by id.
	Inputs map[string]Input
}

// RawServer is one entry of the servers object, not yet converted.
type RawServer struct {
	Key    string
	Fields []member
	// Err says why the entry could not be read (not an object).
	Err error
}

// Input is a VS Code input ("inputs": [{"id", "type", "description", "password"}]).
type Input struct {
	ID          string `json:"id"`
	Type        string `json:"type"`
	Description string `json:"description"`
	Password    bool   `json:"password"`
}

// member is one key of a JSON object, in file order.
type member struct {
	Key   string
	Value json.RawMessage
}

// Parse reads a client configuration. It accepts JSON with comments and
// trailing commas (VS Code's files are JSONC) and finds the servers in
// "mcpServers", "servers" or "mcp"."servers".
func Parse(data []byte) (*Config, error) {
	clean := stripJSONC(data)
	top, err := members(clean)
	if err != nil {
		return nil, syntaxError(clean, err)
	}
	cfg := &Config{Inputs: map[string]Input{}}
	var servers json.RawMessage
	var inputs json.RawMessage
	for _, m := range top {
		switch m.Key {
		case "mcpServers":
			if servers != nil {
				return nil, errors.New(`the file has both "mcpServers" and "servers": import one at a time`)
			}
			cfg.Format, servers = FormatMCPServers, m.Value
		case "servers":
			if servers != nil {
				return nil, errors.New(`the file has both "mcpServers" and "servers": import one at a time`)
			}
			cfg.Format, servers = FormatVSCode, m.Value
		case "inputs":
			inputs = m.Value
		case "mcp": // VS Code settings.json
			inner, err := members(m.Value)
			if err != nil {
				continue // some other "mcp" setting
			}
			for _, im := range inner {
				switch im.Key {
				case "servers":
					if servers == nil {
						cfg.Format, servers = FormatVSCode, im.Value
					}
				case "inputs":
					inputs = im.Value
				}
			}
		}
	}
	if servers == nil {
		return nil, errors.New(`no MCP servers found: expected a "mcpServers" object (Claude Desktop, Cursor, .mcp.json) or a "servers" object (VS Code)`)
	}
	list, err := members(servers)
	if err != nil {
		return nil, fmt.Errorf("%q: want an object of servers by name: %v", cfg.Format, err)
	}
	for _, s := range list {
		fields, err := members(s.Value)
		if err != nil {
			err = fmt.Errorf("want an object with command or url: %v", err)
		}
		cfg.Servers = append(cfg.Servers, RawServer{Key: s.Key, Fields: fields, Err: err})
	}
	if inputs != nil {
		var list []Input
		if err := json.Unmarshal(inputs, &list); err == nil {
			for _, in := range list {
				cfg.Inputs[in.ID] = in
			}
		}
	}
	return cfg, nil
}

// members decodes a JSON object into its members in file order. A
// duplicate key is an error: which one a client uses is anyone's guess.
func members(raw json.RawMessage) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not an object")
	}
	var out []member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, errors.New("object key is not a string")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if seen[key] {
			return nil, fmt.Errorf("duplicate key %q", key)
		}
		seen[key] = true
		out = append(out, member{key, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected content after the object")
	}
	return out, nil
}

// syntaxError adds the line and column to a JSON syntax error.
func syntaxError(data []byte, err error) error {
	var se *json.SyntaxError
	// A Decoder's offsets count what it buffered; Unmarshal's point at the
	// byte after the offending one.
	if uerr := json.Unmarshal(data, new(any)); errors.As(uerr, &se) {
		line, col := 1, 1
		for _, b := range data[:max(min(int(se.Offset)-1, len(data)), 0)] {
			if b == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
		}
		return fmt.Errorf("line %d, column %d: %v", line, col, se)
	}
	return fmt.Errorf("not a JSON object: %v", err)
}

// stripJSONC blanks out comments (// and /* */) and trailing commas, which
// VS Code's JSONC allows, keeping every byte offset and newline so that
// syntax errors point at the right line.
func stripJSONC(data []byte) []byte {
	out := bytes.Clone(data)
	inString := false
	lastComma := -1 // offset of a comma not yet followed by a value
	for i := 0; i < len(out); i++ {
		c := out[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch {
		case c == '"':
			inString, lastComma = true, -1
		case c == '/' && i+1 < len(out) && out[i+1] == '/':
			for ; i < len(out) && out[i] != '\n'; i++ {
				out[i] = ' '
			}
		case c == '/' && i+1 < len(out) && out[i+1] == '*':
			out[i], out[i+1] = ' ', ' '
			for i += 2; i < len(out); i++ {
				if out[i] == '*' && i+1 < len(out) && out[i+1] == '/' {
					out[i], out[i+1] = ' ', ' '
					i++
					break
				}
				if out[i] != '\n' {
					out[i] = ' '
				}
			}
		case c == ',':
			lastComma = i
		case c == '}' || c == ']':
			if lastComma >= 0 {
				out[lastComma] = ' '
			}
			lastComma = -1
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
		default:
			lastComma = -1
		}
	}
	return out
}

// scalarString reads a JSON string, or a number or boolean as its text:
// clients pass env values to a process, where everything is a string.
func scalarString(raw json.RawMessage) (string, bool) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", false
	}
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case bool:
		return strconv.FormatBool(x), true
	}
	return "", false
}
