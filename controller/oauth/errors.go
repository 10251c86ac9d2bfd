package oauth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"golang.org/x/oauth2"
)

// AuthRequiredError says that no valid access token can be had without
// someone acting: a person logging in (Login), or someone fixing the
// client's credentials. tether shows it as phase AuthRequired.
type AuthRequiredError struct {
	// Name is the connection's name, for the command the message names.
	Name string
	// Login is true when `tether login NAME` is what is needed; false when
	// the manifest's client credentials are refused.
	Login bool
	// StepUp is true when the server asks for scopes the token lacks (a
	// 403 with insufficient_scope): the token still serves other calls.
	StepUp bool
	// Reason says why, without any token or secret.
	Reason string
}

func (e *AuthRequiredError) Error() string {
	if e.Login {
		return fmt.Sprintf("%s: run `tether login %s`", e.Reason, e.Name)
	}
	return e.Reason
}

// AuthRequired reports whether a person must run `tether login`: retrying
// before the stored tokens change is pointless. The supervisor finds it by
// this method (errors.As on an interface), without importing this package.
func (e *AuthRequiredError) AuthRequired() bool { return e.Login }

// AsAuthRequired returns the AuthRequiredError in err's chain, if any.
func AsAuthRequired(err error) (*AuthRequiredError, bool) {
	var ae *AuthRequiredError
	ok := errors.As(err, &ae)
	return ae, ok
}

// tokenError describes a failed token request without the body of the
// answer (which could echo anything): the OAuth error code and description
// when the endpoint sent them, else its HTTP status, else the transport's
// error without the URL's query.
func tokenError(what string, err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		msg := what + ": the authorization server answered"
		if re.Response != nil {
			msg += " " + re.Response.Status
		}
		if re.ErrorCode != "" {
			msg += ": " + re.ErrorCode
			if d := oneLine(re.ErrorDescription); d != "" {
				msg += " (" + d + ")"
			}
		}
		return &protocolError{msg: msg, code: re.ErrorCode, cause: err}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		// The token endpoint's URL carries no secret, but keep the message
		// short: the operation and the underlying error.
		return fmt.Errorf("%s: %s: %w", what, ue.Op, ue.Err)
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: %s", what, oneLine(err.Error()))
}

// protocolError is a token endpoint's OAuth error, described safely. Code is
// the RFC 6749 error code ("invalid_grant", ...), empty when it sent none.
type protocolError struct {
	msg   string
	code  string
	cause error
}

func (e *protocolError) Error() string { return e.msg }

// Unwrap keeps the cause reachable for errors.As, but not its message.
func (e *protocolError) Unwrap() error { return e.cause }

// oauthCode returns the OAuth error code a token request failed with.
func oauthCode(err error) string {
	var pe *protocolError
	if errors.As(err, &pe) {
		return pe.code
	}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return ""
}

// oneLine keeps a server's text short and on one line.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
