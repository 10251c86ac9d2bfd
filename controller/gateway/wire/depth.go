package wire

// SDKMaxDepth is how deep the go-sdk lets a message's JSON nest (its
// internal json package's defaultMaxDepth): past it, its server answers a
// POST 400 as malformed and its client fails the request the message
// answers. encoding/json, which the gateway's fast path and a session's
// raw requests parse with, allows ten times as deep.
const SDKMaxDepth = 1000

// WithinSDKDepth reports whether msg nests no deeper than the go-sdk
// reads, counted as the go-sdk counts (objects and arrays, outside
// strings): a body it refuses must not reach a backend by the fast path,
// and an answer it refuses must not reach tether by a raw request.
func WithinSDKDepth(msg []byte) bool {
	depth := 0
	inString, escaped := false, false
	for _, b := range msg {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		switch b {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth > SDKMaxDepth {
				return false
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return true
}
