package kubernetes

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tether-mcp/tether/spec"
)

// Resource is the McpConnection resource that the informer watches.
var Resource = schema.GroupVersionResource{Group: "tether.dev", Version: "v1alpha1", Resource: "mcpconnections"}

// ConnectionName is the name of the connection that the object namespace/name
// declares: name alone when tether watches one namespace (watched is that
// namespace), <namespace>.<name> when it watches all of them (watched is "").
func ConnectionName(watched, namespace, name string) string {
	if watched != "" {
		return name
	}
	return namespace + "." + name
}

// origin is how an entry names its object: namespace/name, as kubectl and
// the informer's cache key do.
func origin(namespace, name string) string { return namespace + "/" + name }

// decodeObject decodes and validates an object's spec with the rules of a
// manifest file (spec.DecodeFile): it feeds DecodeFile the document a file
// would hold (apiVersion, kind, metadata.name and labels, spec). It returns
// the defaulted connection, or nil and the problems, each naming the object
// and the field.
func decodeObject(obj *unstructured.Unstructured) (*spec.McpConnection, string) {
	meta := map[string]any{"name": obj.GetName()}
	if l := obj.GetLabels(); len(l) > 0 {
		meta["labels"] = l
	}
	doc := map[string]any{
		"apiVersion": obj.GetAPIVersion(),
		"kind":       obj.GetKind(),
		"metadata":   meta,
	}
	if s, ok := obj.Object["spec"]; ok {
		doc["spec"] = s
	}
	what := "McpConnection " + origin(obj.GetNamespace(), obj.GetName())
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Sprintf("%s: %v", what, err)
	}
	docs := spec.DecodeFile(what, data)
	if len(docs) != 1 {
		return nil, what + ": spec: required"
	}
	if d := docs[0]; d.Conn != nil {
		return d.Conn, ""
	}
	msgs := make([]string, len(docs[0].Errors))
	for i, e := range docs[0].Errors {
		// Lines and document numbers mean nothing here: the document is
		// one this package wrote, not one the user can open.
		if e.Field != "" {
			msgs[i] = fmt.Sprintf("%s: %s: %s", what, e.Field, e.Msg)
		} else {
			msgs[i] = fmt.Sprintf("%s: %s", what, e.Msg)
		}
	}
	return nil, strings.Join(msgs, "; ")
}
