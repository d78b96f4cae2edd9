package console

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
)

// ErrInsecureListen means a console would serve its token in clear text
// beyond this host.
var ErrInsecureListen = errors.New("console: refusing to listen beyond loopback without TLS")

// CheckListen refuses an address that is not loopback unless the console
// serves TLS or the operator said insecure on purpose. An empty host
// (":8080") listens on every interface, so it is not loopback.
func CheckListen(addr string, tls, insecure bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("console: listen address %q: %w", addr, err)
	}
	if tls || insecure || isLoopback(host) {
		return nil
	}
	return fmt.Errorf("%w: %q (give --tls-cert and --tls-key, listen on 127.0.0.1, or pass --insecure)", ErrInsecureListen, addr)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// ResolveToken returns the console's token: the content of file when
// given, else env (the value of $BATON_CONSOLE_TOKEN), else a new random
// one (generated reports which).
func ResolveToken(env, file string) (token string, generated bool, err error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", false, fmt.Errorf("console: token file: %w", err)
		}
		token = strings.TrimSpace(string(b))
		if token == "" {
			return "", false, fmt.Errorf("console: token file %s is empty", file)
		}
		return token, false, nil
	}
	if env != "" {
		return env, false, nil
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", false, err
	}
	return base64.RawURLEncoding.EncodeToString(b), true, nil
}
