package spec

import "testing"

func TestSalvageName(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"block", "kind: X\nmetadata:\n  labels: {a: b}\n  name: github\nspec: {\n", "github"},
		{"block quoted with comment", "metadata:\n  # the name\n  name: \"gh-2\"  # why\n", "gh-2"},
		{"flow", "metadata: {labels: {a: b}, name: gh}\nspec: [\n", "gh"},
		{"flow unterminated", "metadata: {name: broken\nspec: {stdio: {command: b}}\n", "broken"},
		{"flow name first", "metadata: {name: x, labels: {}}\n", "x"},
		{"crlf", "metadata:\r\n  name: crlf\r\n", "crlf"},
		{"label called name is not the name", "metadata:\n  labels:\n    name: nope\nspec:\n  name: nope\n", ""},
		{"name after metadata ended", "metadata:\n  labels: {}\nname: nope\n", ""},
		{"invalid label", "metadata:\n  name: Not_A_Label\n", ""},
		{"indented metadata is not top level", "  metadata:\n    name: nope\n", ""},
		{"flow labelname is not name", "metadata: {labelname: nope}\n", ""},
		{"flow nested name is not the name", "metadata: {labels: {name: nope}}\n", ""},
		{"nothing", "a: [\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := salvageName([]byte(tt.in)); got != tt.want {
				t.Errorf("salvageName(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
