package cnpconformance

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nftguard/nftguard/internal/netlab"
)

// servedPorts lists what a pod's containers would listen on: every
// declared container port, and the ports the suite's agnhost commands open
// without declaring them (`serve-hostname --tcp|--udp --port N`, `netexec
// --http-port N --udp-port N --sctp-port N`, `porter` with SERVE_PORT_N,
// SERVE_TLS_PORT_N and SERVE_SCTP_PORT_N in its environment). Serving a
// port too many is harmless (a probe the policy should stop still stops);
// one too few would turn an allowed probe into REFUSED.
func servedPorts(spec *corev1.PodSpec) []netlab.Port {
	set := map[netlab.Port]bool{}
	add := func(proto netlab.Proto, num int) {
		if num >= 1 && num <= 65535 {
			set[netlab.Port{Proto: proto, Num: num}] = true
		}
	}
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			switch p.Protocol {
			case corev1.ProtocolUDP:
				add(netlab.UDP, int(p.ContainerPort))
			case corev1.ProtocolSCTP:
				add(netlab.SCTP, int(p.ContainerPort))
			default: // TCP, the API's default
				add(netlab.TCP, int(p.ContainerPort))
			}
		}
		words := strings.Fields(strings.Join(append(append([]string{}, c.Command...), c.Args...), " "))
		flags := map[string]string{}
		sub := ""
		for i := 0; i < len(words); i++ {
			w := words[i]
			switch {
			case strings.HasSuffix(w, "agnhost") && i+1 < len(words):
				sub = words[i+1]
				i++
			case strings.HasPrefix(w, "--"):
				name, val, ok := strings.Cut(strings.TrimPrefix(w, "--"), "=")
				if !ok && i+1 < len(words) && !strings.HasPrefix(words[i+1], "--") {
					if _, err := strconv.Atoi(words[i+1]); err == nil {
						val = words[i+1]
						i++
					}
				}
				if !ok && val == "" {
					val = "true"
				}
				flags[name] = val
			}
		}
		num := func(name string) int { n, _ := strconv.Atoi(flags[name]); return n }
		switch sub {
		case "serve-hostname":
			if flags["tcp"] == "true" {
				add(netlab.TCP, num("port"))
			}
			if flags["udp"] == "true" {
				add(netlab.UDP, num("port"))
			}
			if h, ok := flags["http"]; !ok || h == "true" {
				add(netlab.TCP, num("port"))
			}
		case "netexec":
			add(netlab.TCP, num("http-port"))
			add(netlab.UDP, num("udp-port"))
			add(netlab.SCTP, num("sctp-port"))
		case "porter":
			for _, e := range c.Env {
				for prefix, proto := range map[string]netlab.Proto{"SERVE_PORT_": netlab.TCP, "SERVE_TLS_PORT_": netlab.TCP, "SERVE_SCTP_PORT_": netlab.SCTP} {
					if rest, ok := strings.CutPrefix(e.Name, prefix); ok {
						n, _ := strconv.Atoi(rest)
						add(proto, n)
					}
				}
			}
		}
	}
	out := make([]netlab.Port, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Proto != out[j].Proto {
			return out[i].Proto < out[j].Proto
		}
		return out[i].Num < out[j].Num
	})
	return out
}

// connectCmd is a parsed `agnhost connect` command line.
type connectCmd struct {
	Proto   netlab.Proto
	Timeout time.Duration
	// Host is an IP literal (as netip formats it, unmapped) or a domain
	// name, which the bridge resolves as the pod would.
	Host string
	Port uint16
}

// addr is Host as an address, when it is an IP literal.
func (c connectCmd) addr() (netip.Addr, bool) {
	a, err := netip.ParseAddr(c.Host)
	return a, err == nil
}

// parseConnect accepts exactly what the suite execs: `/agnhost connect
// [--timeout=D] [--protocol=tcp|udp|sctp] HOST:PORT` with an IP literal or
// a domain name for HOST (flags also as two words). Anything else is an
// error: the bridge runs no other command, so a changed probe fails loudly
// instead of being guessed at.
func parseConnect(argv []string) (connectCmd, error) {
	cmd := connectCmd{Proto: netlab.TCP}
	if len(argv) < 2 || (argv[0] != "/agnhost" && argv[0] != "agnhost") || argv[1] != "connect" {
		return cmd, fmt.Errorf("unsupported command %q: the bridge runs only agnhost connect", argv)
	}
	var target string
	args := argv[2:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") {
			if target != "" {
				return cmd, fmt.Errorf("agnhost connect: more than one target in %q", argv)
			}
			target = a
			continue
		}
		name, val, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok {
			if i+1 >= len(args) {
				return cmd, fmt.Errorf("agnhost connect: flag --%s needs a value", name)
			}
			i++
			val = args[i]
		}
		switch name {
		case "timeout":
			d, err := time.ParseDuration(val)
			if err != nil {
				return cmd, fmt.Errorf("agnhost connect: --timeout: %w", err)
			}
			cmd.Timeout = d
		case "protocol":
			switch val {
			case "", "tcp":
				cmd.Proto = netlab.TCP
			case "udp":
				cmd.Proto = netlab.UDP
			case "sctp":
				cmd.Proto = netlab.SCTP
			default:
				return cmd, fmt.Errorf("agnhost connect: unsupported protocol %q", val)
			}
		default:
			return cmd, fmt.Errorf("agnhost connect: unsupported flag --%s", name)
		}
	}
	if target == "" {
		return cmd, fmt.Errorf("agnhost connect: no target in %q", argv)
	}
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return cmd, fmt.Errorf("agnhost connect: target %q is not HOST:PORT: %w", target, err)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return cmd, fmt.Errorf("agnhost connect: target %q: port %q is not 1-65535", target, port)
	}
	cmd.Port = uint16(n)
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return cmd, fmt.Errorf("agnhost connect: target %q: zoned addresses are not probed", target)
		}
		cmd.Host = a.Unmap().String()
	} else if validHostname(host) {
		cmd.Host = host
	} else {
		return cmd, fmt.Errorf("agnhost connect: target %q: host is neither an IP address nor a domain name", target)
	}
	if cmd.Timeout <= 0 {
		// agnhost's default (0) means "no timeout"; the bridge never
		// blocks forever.
		cmd.Timeout = 10 * time.Second
	}
	return cmd, nil
}

// validHostname reports whether name is a host name a pod may look up:
// letters, digits, hyphens and underscores in labels of 1-63 characters
// that neither start nor end with a hyphen, at most 253 characters without
// the optional final dot.
func validHostname(name string) bool {
	name = strings.TrimSuffix(name, ".")
	if name == "" || len(name) > 253 {
		return false
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}
