package spec

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"sigs.k8s.io/yaml"
)

// crdObject is CRD's output, decoded.
func crdObject(t *testing.T) map[string]any {
	t.Helper()
	b, err := CRD()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		t.Fatalf("CRD is not YAML: %v", err)
	}
	return m
}

// dig follows keys (and "0" for a list's first item) into a decoded object.
func dig(t *testing.T, v any, path ...string) any {
	t.Helper()
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			if p != "0" || len(x) == 0 {
				t.Fatalf("no %s in a list of %d", p, len(x))
			}
			v = x[0]
		default:
			t.Fatalf("no %v: %T at %s", path, v, p)
		}
	}
	return v
}

func TestCRDNames(t *testing.T) {
	if CRDGroup+"/"+CRDVersion != APIVersion {
		t.Errorf("CRDGroup/CRDVersion is %s/%s, APIVersion %s", CRDGroup, CRDVersion, APIVersion)
	}
	crd := crdObject(t)
	want := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "mcpconnections.tether.dev"},
	}
	for k, v := range want {
		if got := crd[k]; fmt.Sprint(got) != fmt.Sprint(v) {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}
	spec := dig(t, crd, "spec").(map[string]any)
	if spec["group"] != "tether.dev" || spec["scope"] != "Namespaced" {
		t.Errorf("group %v, scope %v", spec["group"], spec["scope"])
	}
	names, _ := json.Marshal(spec["names"])
	if want := `{"kind":"McpConnection","listKind":"McpConnectionList","plural":"mcpconnections","shortNames":["mcpc"],"singular":"mcpconnection"}`; string(names) != want {
		t.Errorf("names %s, want %s", names, want)
	}
	versions := spec["versions"].([]any)
	if len(versions) != 1 {
		t.Fatalf("%d versions", len(versions))
	}
	v := versions[0].(map[string]any)
	if v["name"] != "v1alpha1" || v["served"] != true || v["storage"] != true {
		t.Errorf("version %v served %v storage %v", v["name"], v["served"], v["storage"])
	}
	if sub, _ := json.Marshal(v["subresources"]); string(sub) != `{"status":{}}` {
		t.Errorf("subresources %s", sub)
	}
	var cols []string
	for _, c := range v["additionalPrinterColumns"].([]any) {
		c := c.(map[string]any)
		cols = append(cols, fmt.Sprintf("%s %s %s", c["name"], c["type"], c["jsonPath"]))
	}
	wantCols := []string{
		"Phase string .status.phase",
		"Tools integer .status.tools.exposed",
		`Ready string .status.conditions[?(@.type=="Ready")].status`,
		"Age date .metadata.creationTimestamp",
	}
	if !slices.Equal(cols, wantCols) {
		t.Errorf("printer columns\n got %q\nwant %q", cols, wantCols)
	}
}

// structuralProblems lists what makes s, a schema node at path, not
// structural in the sense of apiextensions.k8s.io/v1 (the rules the API
// server applies before it accepts a CRD). inJunctor is true inside
// oneOf/anyOf/allOf/not, where only value validations may appear.
func structuralProblems(s map[string]any, path string, inJunctor bool) []string {
	var out []string
	if !inJunctor {
		if t, ok := s["type"].(string); !ok || t == "" {
			out = append(out, path+": no single type")
		}
	}
	for k, v := range s {
		switch {
		case !crdKeywords[k]:
			out = append(out, fmt.Sprintf("%s: %s", path, k))
		case inJunctor && (k == "type" || k == "description" || k == "additionalProperties" || strings.HasPrefix(k, "x-kubernetes-")):
			out = append(out, fmt.Sprintf("%s: %s inside a junctor", path, k))
		case k == "additionalProperties":
			ap, isSchema := v.(map[string]any)
			if !isSchema || s["properties"] != nil {
				out = append(out, path+": additionalProperties must be a schema, and not beside properties")
			}
			if isSchema {
				out = append(out, structuralProblems(ap, path+"[*]", inJunctor)...)
			}
		case k == "properties":
			for name, p := range v.(map[string]any) {
				out = append(out, structuralProblems(p.(map[string]any), path+"."+name, inJunctor)...)
			}
		case k == "items":
			out = append(out, structuralProblems(v.(map[string]any), path+"[]", inJunctor)...)
		case k == "oneOf" || k == "anyOf" || k == "allOf":
			for i, b := range v.([]any) {
				br := b.(map[string]any)
				// A junctor may only name properties the node itself declares.
				for name := range asObject(br["properties"]) {
					if asObject(s["properties"])[name] == nil {
						out = append(out, fmt.Sprintf("%s: %s[%d] names %s, which the node does not declare", path, k, i, name))
					}
				}
				out = append(out, structuralProblems(br, fmt.Sprintf("%s.%s[%d]", path, k, i), true)...)
			}
		}
	}
	return out
}

// crdKeywords are the schema keywords the CRD may use: those of
// apiextensions.k8s.io/v1's JSONSchemaProps that it needs. Others
// (nullable, default, x-kubernetes-preserve-unknown-fields, $ref, ...) are
// not needed, and unknown ones would fail the API server's strict decoding.
var crdKeywords = map[string]bool{
	"description": true, "type": true, "format": true, "enum": true, "pattern": true,
	"minLength": true, "maxLength": true, "minimum": true, "items": true, "properties": true,
	"required": true, "additionalProperties": true, "oneOf": true, "x-kubernetes-validations": true,
}

func TestCRDSchemaIsStructural(t *testing.T) {
	crd := crdObject(t)
	root := dig(t, crd, "spec", "versions", "0", "schema", "openAPIV3Schema").(map[string]any)
	for _, p := range structuralProblems(root, "openAPIV3Schema", false) {
		t.Error(p)
	}
	// metadata is the API server's: a CRD may not say more than its type.
	if md, _ := json.Marshal(dig(t, root, "properties", "metadata")); string(md) != `{"type":"object"}` {
		t.Errorf("metadata schema %s, want only its type", md)
	}
	if req, _ := json.Marshal(root["required"]); string(req) != `["spec"]` {
		t.Errorf("required %s, want [spec]", req)
	}
}

// TestCRDSchemaMatchesTheManifestSchema: the CRD's spec and status describe
// the same fields, with the same types and checks, as the JSON Schemas they
// come from, so nothing is lost in the conversion.
func TestCRDSchemaMatchesTheManifestSchema(t *testing.T) {
	root := dig(t, crdObject(t), "spec", "versions", "0", "schema", "openAPIV3Schema").(map[string]any)
	manifest, err := decodeSchema(Schema())
	if err != nil {
		t.Fatal(err)
	}
	status, err := decodeSchema(StatusSchema())
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	var compare func(js, crd map[string]any, path string)
	compare = func(js, crd map[string]any, path string) {
		if crd == nil {
			t.Errorf("%s: missing from the CRD", path)
			return
		}
		if got, want := crd["type"], mustSingleType(t, js["type"]); got != want {
			t.Errorf("%s: type %v, want %v", path, got, want)
		}
		for _, k := range []string{"description", "pattern", "minLength", "maxLength", "minimum", "format", "required"} {
			if fmt.Sprint(crd[k]) != fmt.Sprint(js[k]) {
				t.Errorf("%s: %s %v, want %v", path, k, crd[k], js[k])
			}
		}
		if js["enum"] != nil && len(crd["enum"].([]any)) == 0 {
			t.Errorf("%s: enum lost", path)
		}
		if js["oneOf"] != nil {
			switch {
			case crd["x-kubernetes-validations"] != nil:
				for _, r := range crd["x-kubernetes-validations"].([]any) {
					rules = append(rules, path+": "+r.(map[string]any)["rule"].(string))
				}
			case crd["oneOf"] != nil:
				rules = append(rules, path+": oneOf")
			default:
				t.Errorf("%s: exactly-one lost", path)
			}
		}
		jp, cp := asObject(js["properties"]), asObject(crd["properties"])
		if len(jp) != len(cp) {
			t.Errorf("%s: %d properties, want %d", path, len(cp), len(jp))
		}
		for name, p := range jp {
			compare(p.(map[string]any), asObject(cp[name]), path+"."+name)
		}
		if items := asObject(js["items"]); items != nil {
			compare(items, asObject(crd["items"]), path+"[]")
		}
	}
	compare(child(child(manifest, "properties"), "spec"), dig(t, root, "properties", "spec").(map[string]any), "spec")
	compare(child(child(status, "properties"), "status"), dig(t, root, "properties", "status").(map[string]any), "status")

	wantRules := []string{
		"spec.container.env[].valueFrom: oneOf",
		"spec.container.env[]: has(self.value) != has(self.valueFrom)",
		"spec.container.secretFiles[].valueFrom: oneOf",
		"spec.container.secretFiles[]: has(self.value) != has(self.valueFrom)",
		"spec.http.headers[].valueFrom: oneOf",
		"spec.http.headers[]: has(self.value) != has(self.valueFrom)",
		"spec.http.oauth.authorizationCode.clientSecret.valueFrom: oneOf",
		"spec.http.oauth.authorizationCode.clientSecret: has(self.value) != has(self.valueFrom)",
		"spec.http.oauth.clientCredentials.clientSecret.valueFrom: oneOf",
		"spec.http.oauth.clientCredentials.clientSecret: has(self.value) != has(self.valueFrom)",
		"spec.http.oauth: has(self.clientCredentials) != has(self.authorizationCode)",
		"spec.stdio.env[].valueFrom: oneOf",
		"spec.stdio.env[]: has(self.value) != has(self.valueFrom)",
		"spec: [has(self.stdio), has(self.http), has(self.container)].exists_one(x, x)",
	}
	slices.Sort(rules)
	if !slices.Equal(rules, wantRules) {
		t.Errorf("exactly-one checks\n got %q\nwant %q", rules, wantRules)
	}
}

func mustSingleType(t *testing.T, v any) string {
	t.Helper()
	s, err := singleType(v, "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCRDSchemaAcceptsEveryValidManifest validates the repository's valid
// manifests against the CRD's schema the way the API server would see them:
// metadata is the object's, nulls are dropped (the API server prunes a null
// field that is not nullable). CEL rules are not evaluated here: the
// kube-apiserver e2e test does that.
func TestCRDSchemaAcceptsEveryValidManifest(t *testing.T) {
	root := dig(t, crdObject(t), "spec", "versions", "0", "schema", "openAPIV3Schema")
	b, err := json.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for name, data := range manifestCorpus(t) {
		docs := DecodeFile(name, data)
		js := jsonDocuments(data)
		for i, d := range docs {
			if d.Conn == nil || len(js) != len(docs) {
				continue
			}
			n++
			if err := rs.Validate(withoutNulls(js[i].value)); err != nil {
				t.Errorf("%s: document %d is valid, the CRD's schema rejects it: %v", name, i+1, err)
			}
		}
	}
	if n < 50 {
		t.Errorf("only %d valid documents checked", n)
	}
}

// withoutNulls drops the null fields of every object, as the API server does.
func withoutNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if e != nil {
				out[k] = withoutNulls(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = withoutNulls(e)
		}
		return out
	}
	return v
}

// TestStructuralRefuses: a keyword the conversion does not know is an error,
// not something passed on to the API server.
func TestStructuralRefuses(t *testing.T) {
	tests := []struct {
		name, schema, want string
	}{
		{"a reference", `{"type":"object","properties":{"a":{"$ref":"#/$defs/a"}}}`, `x.a: keyword "$ref" has no conversion`},
		{"two types", `{"type":["string","integer"]}`, "x: type [string integer] is not one type"},
		{"open object", `{"type":"object","additionalProperties":true}`, "x: additionalProperties: true has no structural equivalent"},
		{"a oneOf of anything", `{"type":"object","oneOf":[{"type":"string"},{"type":"integer"}]}`, "x: oneOf[0] is not one required property"},
		{"a oneOf of one", `{"type":"object","properties":{"a":{"type":"string"}},"oneOf":[{"required":["a"],"properties":{"a":{"type":"string"}}}]}`, "x: oneOf has 1 branches"},
		{"a oneOf with a pattern", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"oneOf":[{"required":["a"],"properties":{"a":{"pattern":"x"}}},{"required":["b"],"properties":{"b":{"type":"string"}}}]}`, "x: oneOf[0]: pattern x has no structural equivalent"},
		{"if/then", `{"type":"object","if":{},"then":{}}`, `x: keyword "if" has no conversion`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s map[string]any
			if err := json.Unmarshal([]byte(tt.schema), &s); err != nil {
				t.Fatal(err)
			}
			_, err := structural(s, "x")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}
