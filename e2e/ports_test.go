package e2e

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// docPorts are the fixed ports the README's commands show: xdsd serve's
// defaults (xDS 18000, admin 18001), a second replica (18010, 18011),
// xdsd relay's defaults (18100, 18101), and a 3-member etcd's client and
// peer ports (12379, 12380, … 32380).
var docPorts = []int{18000, 18001, 18010, 18011, 18100, 18101, 12379, 12380, 22379, 22380, 32379, 32380}

// The defaults of the xdsd commands that listen or connect: a command
// shown without the flag uses them, so the test adds the flag with the
// free port.
var (
	listenDefaults = map[string][2]int{"serve": {18000, 18001}, "relay": {18100, 18101}}
	adminCommands  = []string{"apply", "delete", "status", "history", "diff", "rollback", "backup"}
	serverCommands = []string{"get", "watch"}
)

// ports maps the README's fixed ports to free ones for one test, so that
// the README keeps showing 18000 and 18001 and its tests pass while another
// program holds them (or a test runs in parallel).
type ports struct {
	free map[int]int
	re   *regexp.Regexp
}

// freePorts picks a free 127.0.0.1 port for each of the README's ports:
// all held open together while picking, so that they differ, then closed
// for the commands to take.
func freePorts(t *testing.T) *ports {
	t.Helper()
	p := &ports{free: map[int]int{}}
	var alts []string
	for _, d := range docPorts {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		p.free[d] = l.Addr().(*net.TCPAddr).Port
		alts = append(alts, strconv.Itoa(d))
	}
	p.re = regexp.MustCompile(`\b(?:` + strings.Join(alts, "|") + `)\b`)
	return p
}

// port is the free port standing for the README's port d.
func (p *ports) port(d int) int {
	f, ok := p.free[d]
	if !ok {
		panic(fmt.Sprintf("port %d is not one of the README's", d))
	}
	return f
}

// addr is 127.0.0.1 and the free port standing for the README's port d.
func (p *ports) addr(d int) string { return fmt.Sprintf("127.0.0.1:%d", p.port(d)) }

// text rewrites the README's ports in a file, a URL or an address.
func (p *ports) text(s string) string {
	return p.re.ReplaceAllStringFunc(s, func(m string) string {
		d, _ := strconv.Atoi(m)
		return strconv.Itoa(p.free[d])
	})
}

var (
	// shellPortRE is a port built from a loop variable, as the README's
	// etcd loop writes them: ${i}2379 is 12379, 22379, 32379.
	shellPortRE = regexp.MustCompile(`\$\{([a-z])\}([0-9]{4})\b`)
	// xdsdCommandRE finds an xdsd command in a shell line: xdsd on $PATH,
	// `go run ./cmd/xdsd`, or a path to the binary.
	xdsdCommandRE = regexp.MustCompile(`(?:^|[\s/;&|(])xdsd ([a-z]+)\b`)
)

// command rewrites a README shell command to the free ports: the ports it
// shows, the ports a loop builds from its variable, and the default ports
// of xdsd commands that do not name them (the flag is added).
func (p *ports) command(c string) string {
	// ${i}2379 → ${port_2379[$i]}, with the array defined first.
	var defs []string
	c = shellPortRE.ReplaceAllStringFunc(c, func(m string) string {
		sm := shellPortRE.FindStringSubmatch(m)
		v, tail := sm[1], sm[2]
		arr := "port_" + tail
		def := arr + "=("
		for digit := 1; digit <= 9; digit++ {
			if f, ok := p.free[digit*10000+atoi(tail)]; ok {
				def += fmt.Sprintf("[%d]=%d ", digit, f)
			}
		}
		def = strings.TrimSpace(def) + ")"
		if !slices.Contains(defs, def) {
			defs = append(defs, def)
		}
		return "${" + arr + "[$" + v + "]}"
	})
	var lines []string
	for line := range strings.SplitSeq(c, "\n") {
		lines = append(lines, p.defaults(line))
	}
	c = p.text(strings.Join(lines, "\n"))
	if len(defs) > 0 {
		c = strings.Join(defs, "; ") + "\n" + c
	}
	return c
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// defaults adds, to each xdsd command of a line, the address flags it
// leaves to their defaults, with the README's port (rewritten by text).
func (p *ports) defaults(line string) string {
	var out strings.Builder
	rest := line
	for {
		loc := xdsdCommandRE.FindStringSubmatchIndex(rest)
		if loc == nil {
			out.WriteString(rest)
			return out.String()
		}
		sub := rest[loc[2]:loc[3]]
		// The command's own words: up to the next command separator.
		args := rest[loc[3]:]
		if i := strings.IndexAny(args, "&;|#"); i >= 0 {
			args = args[:i]
		}
		has := func(flag string) bool {
			return strings.Contains(args, "--"+flag+" ") || strings.Contains(args, "--"+flag+"=") ||
				strings.Contains(args, "-"+flag+" ") || strings.Contains(args, "-"+flag+"=")
		}
		var add []string
		switch {
		case listenDefaults[sub] != [2]int{}:
			d := listenDefaults[sub]
			if !has("xds-addr") {
				add = append(add, fmt.Sprintf("--xds-addr 127.0.0.1:%d", d[0]))
			}
			if !has("admin-addr") {
				add = append(add, fmt.Sprintf("--admin-addr 127.0.0.1:%d", d[1]))
			}
		case slices.Contains(adminCommands, sub):
			if !has("admin") {
				add = append(add, "--admin 127.0.0.1:18001")
			}
		case slices.Contains(serverCommands, sub):
			if !has("server") && !has("bootstrap") && !strings.Contains(line, "GRPC_XDS_BOOTSTRAP") {
				add = append(add, "--server 127.0.0.1:18000")
			}
		}
		out.WriteString(rest[:loc[3]])
		for _, a := range add {
			out.WriteString(" " + a)
		}
		rest = rest[loc[3]:]
	}
}

// The rewriting itself: the README's ports become the free ones wherever
// they are written, a loop's ports become an array indexed by its
// variable, and xdsd commands that rely on a default port get the flag.
func TestPortsRewrite(t *testing.T) {
	p := freePorts(t)
	seen := map[int]bool{}
	for _, d := range docPorts {
		f := p.port(d)
		if f == d || seen[f] {
			t.Fatalf("README port %d maps to %d (taken or repeated)", d, f)
		}
		seen[f] = true
	}
	x, a := p.port(18000), p.port(18001)
	for _, tc := range []struct{ in, want string }{
		{"xdsd serve --store mem: --watch examples/quickstart &",
			fmt.Sprintf("xdsd serve --xds-addr 127.0.0.1:%d --admin-addr 127.0.0.1:%d --store mem: --watch examples/quickstart &", x, a)},
		{"xdsd get cds quickstart", fmt.Sprintf("xdsd get --server 127.0.0.1:%d cds quickstart", x)},
		{"xdsd get --bootstrap web-prod.json rds tp2", "xdsd get --bootstrap web-prod.json rds tp2"},
		{"/tmp/b/xdsd apply -f examples/tp2-variants", fmt.Sprintf("/tmp/b/xdsd apply --admin 127.0.0.1:%d -f examples/tp2-variants", a)},
		{"xdsd apply --admin https://127.0.0.1:18001 --ca-file ca.crt -f x", fmt.Sprintf("xdsd apply --admin https://127.0.0.1:%d --ca-file ca.crt -f x", a)},
		{"go run ./cmd/xdsd relay --upstream 127.0.0.1:18000 &   # xDS on :18100",
			fmt.Sprintf("go run ./cmd/xdsd relay --xds-addr 127.0.0.1:%d --admin-addr 127.0.0.1:%d --upstream 127.0.0.1:%d &   # xDS on :%d", p.port(18100), p.port(18101), x, p.port(18100))},
		{"xdsd serve --xds-addr :18010 --admin-addr 127.0.0.1:18011 &", fmt.Sprintf("xdsd serve --xds-addr :%d --admin-addr 127.0.0.1:%d &", p.port(18010), p.port(18011))},
		{"xdsd version; xdsd validate -f examples", "xdsd version; xdsd validate -f examples"},
		{"curl https://127.0.0.1:18001/v1/audit", fmt.Sprintf("curl https://127.0.0.1:%d/v1/audit", a)},
		{"for i in 1 2; do\n  etcd --listen-client-urls http://127.0.0.1:${i}2379 --initial-cluster m1=http://127.0.0.1:12380 &\ndone",
			fmt.Sprintf("port_2379=([1]=%d [2]=%d [3]=%d)\nfor i in 1 2; do\n  etcd --listen-client-urls http://127.0.0.1:${port_2379[$i]} --initial-cluster m1=http://127.0.0.1:%d &\ndone",
				p.port(12379), p.port(22379), p.port(32379), p.port(12380))},
	} {
		if got := p.command(tc.in); got != tc.want {
			t.Errorf("command(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
	if got, want := p.text(`"server_uri": "127.0.0.1:18000"`), fmt.Sprintf(`"server_uri": "127.0.0.1:%d"`, x); got != want {
		t.Errorf("text: %s, want %s", got, want)
	}
}
