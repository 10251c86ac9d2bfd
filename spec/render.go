package spec

import (
	"bytes"
	"encoding/json"

	yamlv3 "go.yaml.in/yaml/v3"
)

// RenderYAML renders v as YAML through its JSON encoding, keeping the
// struct's field order (sigs.k8s.io/yaml would sort keys, which puts
// "attempt" above "phase"): JSON is YAML, so yaml.v3 reads it into a node
// tree in order; block style then makes it read like a hand-written file.
func RenderYAML(v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var n yamlv3.Node
	if err := yamlv3.Unmarshal(j, &n); err != nil {
		return nil, err
	}
	blockStyle(&n)
	var buf bytes.Buffer
	enc := yamlv3.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func blockStyle(n *yamlv3.Node) {
	if n.Kind == yamlv3.ScalarNode {
		// Keep quotes only where YAML needs them to read the value back as
		// the same string ("True", "2026-…", "").
		if n.Tag == "!!str" {
			n.Style = 0
		}
		return
	}
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}
