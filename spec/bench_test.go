package spec

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// BenchmarkDecodeFile decodes, defaults and validates manifests: the
// two-document full.yaml, and a file of 100 connections.
func BenchmarkDecodeFile(b *testing.B) {
	full, err := os.ReadFile("testdata/decode/full.yaml")
	if err != nil {
		b.Fatal(err)
	}
	var many strings.Builder
	for i := range 100 {
		fmt.Fprintf(&many, "---\napiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata: {name: c%d}\n"+
			"spec:\n  stdio:\n    command: srv\n    args: [-v, --port, \"80\"]\n    env: [{name: A, valueFrom: {env: A}}]\n"+
			"  tools: {allow: [get_*]}\n  healthCheck: {interval: 10s}\n", i)
	}
	for _, bc := range []struct {
		name string
		data []byte
		docs int
	}{
		{"full", full, 2},
		{"100docs", []byte(many.String()), 100},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.data)))
			b.ReportAllocs()
			for b.Loop() {
				docs := DecodeFile("bench.yaml", bc.data)
				if len(docs) != bc.docs || docs[len(docs)-1].Conn == nil {
					b.Fatalf("unexpected result: %+v", docs)
				}
			}
		})
	}
}

// BenchmarkHash hashes a defaulted connection with every field set.
func BenchmarkHash(b *testing.B) {
	full, err := os.ReadFile("testdata/decode/full.yaml")
	if err != nil {
		b.Fatal(err)
	}
	c := DecodeFile("full.yaml", full)[0].Conn
	b.Run("Hash", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = c.Spec.Hash()
		}
	})
	b.Run("ConnectHash", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = c.Spec.ConnectHash()
		}
	})
}
