// Package httpguard owns the checks tether's HTTP listeners (the gateway and
// /metrics) make of a request's Host and Origin before anything else, against
// DNS rebinding (docs/contract.md, "Limits on what clients send"): a page on
// a foreign site that resolves its own name to 127.0.0.1 reaches a loopback
// listener with that foreign name in Host, and a browser adds its Origin.
// It must not know MCP, sessions or tokens: it answers 403 or passes on.
package httpguard

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// Origins is an allow-list of request origins. The zero value (and
// LoopbackOrigins) admits the origins of loopback hosts only: http or https,
// host localhost, 127.0.0.1 (any loopback IP) or [::1], any port.
type Origins struct {
	exact map[string]bool // "scheme://host[:port]", lower case
	any   bool            // "*": every origin
}

// ParseOrigins reads an allow-list: each entry is "*" (any origin),
// "loopback" (the default), or an origin "scheme://host[:port]". An empty
// list means loopback only. The error names the entry and what is wrong.
func ParseOrigins(entries []string) (Origins, error) {
	var o Origins
	for _, e := range entries {
		e = strings.TrimSpace(e)
		switch {
		case e == "":
			continue
		case e == "*":
			o.any = true
			continue
		case e == "loopback":
			continue // always admitted
		}
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return Origins{}, fmt.Errorf("origin %q: want scheme://host[:port] with scheme http or https, \"loopback\" or \"*\"", e)
		}
		if o.exact == nil {
			o.exact = make(map[string]bool)
		}
		o.exact[strings.ToLower(u.Scheme+"://"+u.Host)] = true
	}
	return o, nil
}

// Allows reports whether a request's Origin header value is admitted. A
// request without Origin (every non-browser client) is admitted: the header
// is what a browser adds, and its absence is no sign of a rebinding page.
func (o Origins) Allows(origin string) bool {
	if origin == "" || o.any {
		return true
	}
	if o.exact[strings.ToLower(origin)] {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Path != "" || u.User != nil {
		return false
	}
	return IsLoopbackHost(u.Host)
}

// IsLoopbackHost reports whether a Host header (or host:port address) names
// a loopback host: localhost, or a loopback IP.
func IsLoopbackHost(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// Check answers 403 to a request whose Origin is not admitted, or whose Host
// is not a loopback name while it arrived on a loopback address (a DNS
// rebinding page's request carries its own site's name), and reports whether
// it did. The answer names the header at fault, never a credential.
func (o Origins) Check(w http.ResponseWriter, r *http.Request) bool {
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && local != nil {
		if IsLoopbackHost(local.String()) && !IsLoopbackHost(r.Host) {
			http.Error(w, fmt.Sprintf("Forbidden: Host %q is not a loopback name on a loopback listener", r.Host), http.StatusForbidden)
			return true
		}
	}
	if origin := r.Header.Get("Origin"); !o.Allows(origin) {
		http.Error(w, fmt.Sprintf("Forbidden: Origin %q is not allowed (see --allowed-origins)", origin), http.StatusForbidden)
		return true
	}
	return false
}

// Handler is next behind Check.
func (o Origins) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o.Check(w, r) {
			return
		}
		next.ServeHTTP(w, r)
	})
}
