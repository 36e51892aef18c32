package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/resource"
)

// browser returns a chromedp context on a headless Chromium with a
// 1280 px wide window, or skips the test when no Chromium is installed
// (.ci/run installs Debian's, and sets XDSD_REQUIRE_BROWSER so that CI
// fails rather than skips).
func browser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, p := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if f, err := exec.LookPath(p); err == nil {
			path = f
			break
		}
	}
	if path == "" {
		if os.Getenv("XDSD_REQUIRE_BROWSER") != "" {
			t.Fatal("no chromium on PATH, and XDSD_REQUIRE_BROWSER is set: install Debian's chromium package")
		}
		t.Skip("browser test skipped: no chromium on PATH (install Debian's chromium package to run it)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900), chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true), chromedp.NoFirstRun)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx
}

// artifact saves a test's output file (a screenshot) where CI keeps it:
// $XDSD_ARTIFACTS, else the test's temporary directory.
func artifact(t *testing.T, name string, data []byte) {
	dir := os.Getenv("XDSD_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("saved %s", p)
}

// The admin page in a real browser at 1280 px: which client holds which
// variant, a NACK with the rejected version and its reason on screen, long
// xdstp:// names wrapped rather than pushing columns off-screen, and the
// recent revisions with their rollout and diffs.
func TestPageInBrowser(t *testing.T) {
	ctx := browser(t)
	xds, adm := startServe(t)
	long := "xdstp://an-authority-with-a-long-name.example.com/envoy.config.cluster.v3.Cluster/" +
		"a/very/long/path/of/segments/that/keeps/going/and/going/until/it/is/wider/than/any/column/should/be?shard=eu-west-1&tier=gold"
	dir := t.TempDir()
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "-f", writeFile(t, dir, "b.yaml", routes("p1", "t1")+"---\n"+cl+"name: "+long+"\n")); code != 0 {
		t.Fatal(errOut)
	}
	conn, err := grpc.NewClient(xds, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	prod := protocoltest.NewSotW(t, conn, protocoltest.Node("prod-1", map[string]string{"env": "prod"}))
	prod.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}})
	prod.Ack(prod.Recv(), "r")
	test := protocoltest.NewSotW(t, conn, protocoltest.Node("test-1", map[string]string{"env": "test"}))
	test.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}})
	test.Ack(test.Recv(), "r")
	cds := protocoltest.NewSotW(t, conn, protocoltest.Node("cds-with-a-long-subscription", nil))
	cds.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{long}})
	cds.Ack(cds.Recv(), long)

	// A second revision: prod takes it, test rejects it.
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "--client", "none", "-f", writeFile(t, dir, "b.yaml", routes("p2", "t2")+"---\n"+cl+"name: "+long+"\n")); code != 0 {
		t.Fatal(errOut)
	}
	prod.Ack(prod.Recv(), "r")
	r := test.Recv()
	reason := "route r: virtual host t2 is refused by this client because of a long reason that must wrap within its column"
	test.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}, ResponseNonce: r.Nonce,
		ErrorDetail: &status.Status{Code: 3, Message: reason}})
	testutil.Eventually(t, "the server has the NACK", func() bool {
		code, out, _ := runCmd(t, "status", "--admin", adm)
		return code == 0 && strings.Contains(out, "1 NACKed")
	})

	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+adm+"/"), chromedp.WaitVisible(chromedp.ID("resources"))); err != nil {
		t.Fatal(err)
	}
	eval := func(js string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return v
	}
	num := func(js string) float64 {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[float64](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return v
	}
	text := eval(`document.body.innerText`)
	scrollWidth := num(`document.documentElement.scrollWidth`)
	nackRight := num(`(() => { for (const e of document.querySelectorAll("span.bad")) if (e.textContent.includes("rejected version")) return e.getBoundingClientRect().right; return -1 })()`)
	nameRight := num(`(() => { let m = 0; for (const e of document.querySelectorAll("code")) if (e.textContent.startsWith("xdstp://an-authority")) m = Math.max(m, e.getBoundingClientRect().right); return m })()`)
	holders := eval(`Array.from(document.querySelectorAll("#resources tr")).filter(r => r.textContent.includes("env=")).map(r => r.cells[2].textContent + " => " + r.cells[4].textContent).join("\n")`)
	revisions := eval(`document.getElementById("revisions").innerText`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#revisions details summary"))); err != nil {
		t.Fatal(err)
	}
	diffVisible := eval(`(() => { const p = document.querySelector("#revisions pre.diff"); return String(!!p && p.getBoundingClientRect().height > 0 && p.textContent.includes("+")) })()`) == "true"
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	artifact(t, "admin-page-1280.png", shot)
	if scrollWidth > 1280 {
		t.Errorf("the page is %v px wide at 1280: something pushes it off-screen", scrollWidth)
	}
	if nackRight < 0 || nackRight > 1280 {
		t.Errorf("the NACK's right edge is at %v px (want on screen, ≤ 1280)", nackRight)
	}
	if nameRight <= 0 || nameRight > 1280 {
		t.Errorf("the long xdstp:// name's right edge is at %v px (want wrapped on screen)", nameRight)
	}
	for _, want := range []string{"prod-1", "test-1", "env=prod", reason, "rejected version " + r.VersionInfo} {
		if !strings.Contains(text, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	// Which client was sent which variant: prod-1 took revision 2's prod
	// variant; test-1 was sent revision 2's test variant and rejected it.
	if !strings.Contains(holders, "env=prod => prod-1 @2-") ||
		!regexp.MustCompile(`env=test => test-1 @2-[0-9a-f]+ \(NACKed\)`).MatchString(holders) {
		t.Errorf("held by:\n%s", holders)
	}
	for _, want := range []string{"1 ACKed, 1 NACKed, 0 pending", "test-1 rejected " + r.VersionInfo, "via apply", "updated route r"} {
		if !strings.Contains(revisions, want) {
			t.Errorf("recent revisions lack %q:\n%s", want, revisions)
		}
	}
	if !diffVisible {
		t.Error("the revision's diff does not open")
	}

	// At fleet scale: the clients by group (agent and parameters), the
	// rollout drawn per group, and a search by node id.
	groups := eval(`document.getElementById("groups").innerText`)
	for _, want := range []string{"grpc-go", "env=prod", "env=test", "prod-1", "test-1"} {
		if !strings.Contains(groups, want) {
			t.Errorf("the groups lack %q:\n%s", want, groups)
		}
	}
	if bars := num(`document.querySelectorAll("#revisions .bar .nack").length`); bars < 1 {
		t.Error("no rollout bar per group")
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+adm+"/?node=prod"), chromedp.WaitVisible(chromedp.ID("resources"))); err != nil {
		t.Fatal(err)
	}
	if text := eval(`document.body.innerText`); !strings.Contains(text, "Clients (1 matching prod)") || strings.Contains(text, "test-1 "+"\t") {
		t.Errorf("search by node id:\n%s", text)
	}
}

// The page's client list across replicas, in a real browser: replica A
// serves 2 clients and B 52; A's page lists all 54, 50 at a time (A's
// first, then B's), each naming its replica in a column of its own, pages
// on to B's last four by its "next" link, and searches B's clients by
// node id. A replica that does not answer is named in a banner.
func TestFleetPageAcrossReplicasInBrowser(t *testing.T) {
	ctx := browser(t)
	c := etcdtest.Start(t, 1)
	url := c.URL("page")
	xdsA, admA := startServe(t, "--store", url)
	xdsB, admB := startServe(t, "--store", url)
	connect := func(xds string, nodes ...string) {
		conn, err := grpc.NewClient(xds, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		for _, n := range nodes {
			s := protocoltest.NewSotW(t, conn, protocoltest.Node(n, map[string]string{"env": "prod"}))
			t.Cleanup(s.Close)
			s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL})
		}
	}
	connect(xdsA, "a-1", "a-2")
	var onB []string
	for i := 1; i <= 52; i++ {
		onB = append(onB, fmt.Sprintf("b-%02d", i))
	}
	connect(xdsB, onB...)
	testutil.Eventually(t, "A's page to count every replica's clients", func() bool {
		_, body := httpGet(t, "http://"+admA+"/v1/clients/page?limit=1")
		return strings.Contains(body, `"matched": 54`)
	})

	rows := func() []string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll("#clients tr")).slice(1).filter(r => r.cells.length > 2 && r.cells[0].querySelector("code")).map(r => r.cells[0].querySelector("code").textContent + " @ " + r.cells[1].textContent.trim()).join("\n")`))
		if err != nil {
			t.Fatal(err)
		}
		if v == "" {
			return nil
		}
		return strings.Split(v, "\n")
	}
	want := func(nodes []string, replica string) []string {
		out := make([]string, len(nodes))
		for i, n := range nodes {
			out[i] = n + " @ " + replica
		}
		return out
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+admA+"/"), chromedp.WaitVisible(chromedp.ID("clients"))); err != nil {
		t.Fatal(err)
	}
	head, err := chromedp.Run(ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll("#clients th")).map(h => h.textContent).join(",")`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(head, "node,replica,") {
		t.Errorf("the clients' columns: %s, want node, then replica", head)
	}
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "Clients (54)") {
		t.Errorf("the page does not count the whole fleet's clients:\n%s", text)
	}
	// A's clients first, then B's; within a replica, in connection order
	// (the order the server took the streams in, not their names').
	page1 := rows()
	if len(page1) != 50 || !slices.Equal(sorted(page1[:2]), want([]string{"a-1", "a-2"}, admA)) || len(slices.DeleteFunc(slices.Clone(page1[2:]), func(r string) bool { return strings.HasSuffix(r, " @ "+admB) })) != 0 {
		t.Errorf("page 1: A's 2 clients, then 48 of B's, each with its replica; got:\n%s", strings.Join(page1, "\n"))
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	artifact(t, "admin-page-replicas-1280.png", shot)
	if w, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.documentElement.scrollWidth`)); err != nil || w > 1280 {
		t.Errorf("the page is %v px wide at 1280 (%v)", w, err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`a[href^="/?page=2"]`)), chromedp.WaitVisible(chromedp.ID("clients"))); err != nil {
		t.Fatal(err)
	}
	var page2 []string
	testutil.Eventually(t, "page 2 to show B's last 4 clients", func() bool { page2 = rows(); return len(page2) == 4 })
	if all := sorted(append(slices.Clone(page1), page2...)); !slices.Equal(all, sorted(append(want([]string{"a-1", "a-2"}, admA), want(onB, admB)...))) {
		t.Errorf("pages 1 and 2 do not list every client once:\n%s", strings.Join(all, "\n"))
	}

	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+admA+"/?node=b-5"), chromedp.WaitVisible(chromedp.ID("clients"))); err != nil {
		t.Fatal(err)
	}
	if got := sorted(rows()); !slices.Equal(got, want([]string{"b-50", "b-51", "b-52"}, admB)) {
		t.Errorf("searching b-5 through A: %v", got)
	}

	ghost := ghostReplica(t, url)
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+admA+"/"), chromedp.WaitVisible(chromedp.ID("unreachable"))); err != nil {
		t.Fatal(err)
	}
	banner, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("unreachable").innerText`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(banner, "1 registered replica did not answer") || !strings.Contains(banner, ghost) || !strings.Contains(banner, "connection refused") {
		t.Errorf("the banner: %s", banner)
	}
	if got := rows(); !slices.Equal(got, page1) {
		t.Errorf("with a ghost replica, page 1 changed:\n%s", strings.Join(got, "\n"))
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
