package spec

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// Changes names the fields that differ between two specs, as field paths
// (`spec.stdio.args`, `spec.stdio.env[GITHUB_TOKEN]`, `spec.toolPrefix`),
// split the way tether run acts on them: connect lists those that need a
// new session (what ConnectHash covers), inPlace the others (what Hash
// covers besides). connect is empty exactly when the ConnectHashes are
// equal, and both are empty exactly when the Hashes are: they are read off
// the same views of the spec the hashes digest. Paths name fields, never
// values: an env or header value may be a secret (docs/contract.md §1).
func Changes(old, new *Spec) (connect, inPlace []string) {
	connect = fieldPaths("spec", jsonValue(old.connectView()), jsonValue(new.connectView()), nil)
	for _, p := range fieldPaths("spec", jsonValue(old.hashView()), jsonValue(new.hashView()), nil) {
		if !isConnectPath(p) {
			inPlace = append(inPlace, p)
		}
	}
	return connect, inPlace
}

// isConnectPath: the transports are what connectView holds.
func isConnectPath(p string) bool {
	for _, t := range []string{"spec.stdio", "spec.http", "spec.container"} {
		if rest, ok := strings.CutPrefix(p, t); ok && (rest == "" || rest[0] == '.' || rest[0] == '[') {
			return true
		}
	}
	return false
}

// jsonValue is v as encoding/json decodes it into any: the encoding digest
// hashes, so two values differ here exactly when their digests do.
func jsonValue(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic("spec: changes: " + err.Error())
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		panic("spec: changes: " + err.Error())
	}
	return out
}

// fieldPaths appends to out the paths under path where a and b differ.
// Objects are compared key by key; a list of objects that each have a
// distinct "name" (env, headers) entry by entry, by name; anything else
// whole.
func fieldPaths(path string, a, b any, out []string) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := make([]string, 0, len(am)+len(bm))
		for k := range am {
			keys = append(keys, k)
		}
		for k := range bm {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range slices.Compact(keys) {
			out = fieldPaths(path+"."+k, am[k], bm[k], out)
		}
		return out
	}
	if an, ok := byName(a); ok {
		if bn, ok := byName(b); ok {
			keys := make([]string, 0, len(an)+len(bn))
			for k := range an {
				keys = append(keys, k)
			}
			for k := range bn {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			before := len(out)
			for _, k := range slices.Compact(keys) {
				if !reflect.DeepEqual(an[k], bn[k]) {
					out = append(out, path+"["+k+"]")
				}
			}
			// The order of env entries and headers is part of the
			// encoding too: a reordering alone changes the hash.
			if len(out) == before && !reflect.DeepEqual(a, b) {
				out = append(out, path)
			}
			return out
		}
	}
	if !reflect.DeepEqual(a, b) {
		out = append(out, path)
	}
	return out
}

// byName indexes a list of objects by their distinct "name".
func byName(v any) (map[string]any, bool) {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil, false
	}
	m := make(map[string]any, len(list))
	for _, e := range list {
		o, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		n, ok := o["name"].(string)
		if !ok {
			return nil, false
		}
		if _, dup := m[n]; dup {
			return nil, false
		}
		m[n] = o
	}
	return m, true
}
