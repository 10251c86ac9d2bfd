// Package oauth gets access tokens for MCP servers that require OAuth
// (spec.http.oauth, docs/contract.md §10), with the go-sdk's auth, auth/extauth
// and oauthex packages doing the protocol:
//
//   - client credentials: extauth.ClientCredentialsHandler, wrapped by
//     NewClientCredentials to ask for the manifest's scopes and to report a
//     refused client as AuthRequiredError;
//   - authorization code, at `tether login`: the go-sdk's
//     AuthorizationCodeHandler (discovery, dynamic client registration or a
//     client ID metadata document, PKCE, resource indicators), with a
//     loopback receiver for the redirect (Login), storing what it got in a
//     Store;
//   - authorization code, at `tether run`: the tokens login stored, refreshed
//     by a TokenSource that writes a rotated refresh token back, behind a
//     handler (Store.Handler) that never needs a person and says
//     AuthRequiredError when one is needed.
//
// Guard serialises a handler for use by several requests at once and tells
// the session which tokens to redact and when no token can be had any more;
// RoundTripper carries the token on requests the go-sdk does not make
// itself (tether's raw fast path, the SSE transport).
//
// The Store keeps one file per connection, tokens/<name>.json under the
// state directory: mode 0600 in a 0700 directory, written atomically. Watch
// tells tether run when `tether login` wrote one, so that a connection
// waiting for a login resumes by itself.
//
// No token, refresh token or client secret ever appears in an error this
// package returns: the token endpoint's answers are reduced to their OAuth
// error code and description.
package oauth
