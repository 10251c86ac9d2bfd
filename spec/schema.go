package spec

import (
	_ "embed" // the generated schemas
	"slices"
)

//go:generate go run ../hack/schemagen -dir .

// The JSON Schemas that hack/schemagen generates from the types in types.go:
// hack/verify-generated.sh keeps them in step with the types.
var (
	//go:embed zz_generated.schema.json
	manifestSchema []byte
	//go:embed zz_generated.status.schema.json
	statusSchema []byte
)

// Schema returns the JSON Schema (draft 2020-12) of an McpConnection manifest
// document, as `tether schema` prints it. It says what JSON Schema can say of
// the rules DecodeFile applies (field names and types, required fields,
// enums, patterns, exactly one transport), so a manifest it rejects is
// invalid; some rules only DecodeFile checks (unique names, URL schemes, glob
// syntax, durations that must be positive, backoff.max not below initial).
func Schema() []byte { return slices.Clone(manifestSchema) }

// StatusSchema returns the JSON Schema of a status document (StatusDocument),
// whose status property is the status subresource's schema in the CRD.
func StatusSchema() []byte { return slices.Clone(statusSchema) }
