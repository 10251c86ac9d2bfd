// Package wire holds the few types that cross between the gateway and a
// backend session (controller/connection) without either package importing
// the other: the gateway declares what it needs of a backend
// (gateway.Backend) in these terms, and connection.Session provides it.
package wire

import "encoding/json"

// RawParam is one params key of a tools/call, forwarded as it came.
type RawParam struct {
	Key   string
	Value json.RawMessage
}
