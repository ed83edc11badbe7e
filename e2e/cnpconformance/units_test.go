package cnpconformance

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/internal/netlab"
)

func upstreamHelper(t *testing.T) []byte {
	t.Helper()
	dir, err := kubetest.ModuleDir(kubetest.CNPModule)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(dir, helperPath))
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func TestPatchRunCommand(t *testing.T) {
	src := upstreamHelper(t)
	out, err := patchRunCommand(src)
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	for _, want := range []string{"return nftguardExec(podNamespace, podName, containerName, cmd)", "func PokeServer(", "func doPokeServer("} {
		if !strings.Contains(got, want) {
			t.Errorf("patched helper.go lacks %q", want)
		}
	}
	for _, gone := range []string{"NewSPDYExecutor", "\t\"bytes\"\n", `"k8s.io/client-go/tools/remotecommand"`, `"k8s.io/client-go/kubernetes/scheme"`, `corev1 "k8s.io/api/core/v1"`} {
		if strings.Contains(got, gone) {
			t.Errorf("patched helper.go still has %q", gone)
		}
	}
	// Imports other functions use stay.
	for _, kept := range []string{`v1 "k8s.io/api/core/v1"`, `"k8s.io/client-go/rest"`, `"strings"`, `"context"`} {
		if !strings.Contains(got, kept) {
			t.Errorf("patched helper.go lost import %s", kept)
		}
	}
	// Everything outside the function is byte for byte upstream's.
	before, _, _ := strings.Cut(string(src), patchedSignature)
	_, after, _ := strings.Cut(string(src), "\n}\n\n// PokeServer")
	if !strings.Contains(got, strings.TrimSpace(after)) {
		t.Error("text after RunCommandFromPod changed")
	}
	for _, line := range strings.Split(before, "\n") {
		dropped := strings.Contains(line, "remotecommand") || strings.Contains(line, "scheme") ||
			strings.Contains(line, "corev1") || line == "\t\"bytes\""
		if !strings.Contains(got, line) && !dropped {
			t.Errorf("line before RunCommandFromPod lost: %q", line)
		}
	}

	// Upstream changes fail loudly.
	changed := map[string]string{
		"signature":   strings.Replace(string(src), "cmd []string) (stdout string", "cmd []string, extra int) (stdout string", 1),
		"body":        strings.Replace(string(src), "remotecommand.NewSPDYExecutor", "remotecommand.NewWebSocketExecutor", 1),
		"renamed":     strings.Replace(string(src), "func RunCommandFromPod(", "func RunCommandInPod(", 1),
		"not go code": "package kubernetes\nfunc {",
	}
	for name, text := range changed {
		if _, err := patchRunCommand([]byte(text)); err == nil {
			t.Errorf("%s changed: patch applied without an error", name)
		}
	}
}

func TestServedPorts(t *testing.T) {
	sh := func(cmd string) corev1.Container {
		return corev1.Container{Command: []string{"/bin/bash", "-c", cmd}}
	}
	tcp := func(n int) netlab.Port { return netlab.Port{Proto: netlab.TCP, Num: n} }
	udp := func(n int) netlab.Port { return netlab.Port{Proto: netlab.UDP, Num: n} }
	sctp := func(n int) netlab.Port { return netlab.Port{Proto: netlab.SCTP, Num: n} }
	for _, tc := range []struct {
		name       string
		containers []corev1.Container
		want       []netlab.Port
	}{
		{"client only", []corev1.Container{{Name: "x-client"}}, []netlab.Port{}},
		{"serve-hostname tcp with declared port", []corev1.Container{func() corev1.Container {
			c := sh("/agnhost serve-hostname --tcp --http=false --port 80")
			c.Ports = []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP, Name: "web"}}
			return c
		}()}, []netlab.Port{tcp(80)}},
		{"serve-hostname udp undeclared", []corev1.Container{sh("/agnhost serve-hostname --udp --http=false --port 5353")}, []netlab.Port{udp(5353)}},
		{"serve-hostname with http", []corev1.Container{sh("/agnhost serve-hostname --udp --port=53")}, []netlab.Port{tcp(53), udp(53)}},
		{"netexec", []corev1.Container{sh("/agnhost netexec --http-port 34348 --udp-port 34347 --udp-listen-addresses $(HOST_IP)")}, []netlab.Port{tcp(34348), udp(34347)}},
		{"porter sctp", []corev1.Container{{Command: []string{"/bin/bash", "-c", "/agnhost porter"},
			Env: []corev1.EnvVar{{Name: "SERVE_SCTP_PORT_9003", Value: "foo"}, {Name: "SERVE_PORT_8081", Value: "x"}}}}, []netlab.Port{sctp(9003), tcp(8081)}},
		{"declared udp and sctp, duplicates merged", []corev1.Container{
			{Ports: []corev1.ContainerPort{{ContainerPort: 53, Protocol: corev1.ProtocolUDP}, {ContainerPort: 9005, Protocol: corev1.ProtocolSCTP}}},
			sh("/agnhost serve-hostname --udp --http=false --port 53"),
		}, []netlab.Port{sctp(9005), udp(53)}},
		{"garbage", []corev1.Container{sh("/agnhost serve-hostname --tcp --port 99999"), sh("sleep 1000")}, []netlab.Port{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := servedPorts(&corev1.PodSpec{Containers: tc.containers})
			if len(got) == 0 && len(tc.want) == 0 {
				return
			}
			want := append([]netlab.Port(nil), tc.want...)
			// servedPorts sorts by protocol name, then number.
			sortPorts(want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

func sortPorts(ps []netlab.Port) {
	for i := range ps {
		for j := i + 1; j < len(ps); j++ {
			if ps[j].Proto < ps[i].Proto || (ps[j].Proto == ps[i].Proto && ps[j].Num < ps[i].Num) {
				ps[i], ps[j] = ps[j], ps[i]
			}
		}
	}
}

func TestParseConnect(t *testing.T) {
	for _, tc := range []struct {
		argv    []string
		want    connectCmd
		wantErr bool
	}{
		{argv: strings.Fields("/agnhost connect --timeout=1s --protocol=tcp 10.100.0.2:80"),
			want: connectCmd{Proto: netlab.TCP, Timeout: time.Second, Host: "10.100.0.2", Port: 80}},
		{argv: strings.Fields("/agnhost connect --timeout=500ms --protocol=udp 10.100.0.2:53"),
			want: connectCmd{Proto: netlab.UDP, Timeout: 500 * time.Millisecond, Host: "10.100.0.2", Port: 53}},
		{argv: strings.Fields("agnhost connect --protocol sctp --timeout 2s [fd00:10:100::2]:9003"),
			want: connectCmd{Proto: netlab.SCTP, Timeout: 2 * time.Second, Host: "fd00:10:100::2", Port: 9003}},
		{argv: strings.Fields("/agnhost connect [::ffff:10.0.0.3]:80"),
			want: connectCmd{Proto: netlab.TCP, Timeout: 10 * time.Second, Host: "10.0.0.3", Port: 80}},
		{argv: strings.Fields("/agnhost connect 10.0.0.3:34345"),
			want: connectCmd{Proto: netlab.TCP, Timeout: 10 * time.Second, Host: "10.0.0.3", Port: 34345}},
		{argv: strings.Fields("/agnhost connect --timeout=1s server.example:80"),
			want: connectCmd{Proto: netlab.TCP, Timeout: time.Second, Host: "server.example", Port: 80}},
		{argv: strings.Fields("/agnhost connect --protocol=udp Honeydukes.high-street.hogsmeade.hogwarts.test.:80"),
			want: connectCmd{Proto: netlab.UDP, Timeout: 10 * time.Second, Host: "Honeydukes.high-street.hogsmeade.hogwarts.test.", Port: 80}},
		{argv: strings.Fields("/agnhost connect kube-dns:53"),
			want: connectCmd{Proto: netlab.TCP, Timeout: 10 * time.Second, Host: "kube-dns", Port: 53}},
		{argv: strings.Fields("/agnhost connect --protocol=icmp 10.0.0.3:1"), wantErr: true},
		{argv: strings.Fields("/agnhost connect --timeout=soon 10.0.0.3:1"), wantErr: true},
		{argv: strings.Fields("/agnhost connect --udp-data=x 10.0.0.3:1"), wantErr: true},
		{argv: strings.Fields("/agnhost connect 10.0.0.3:80 10.0.0.4:80"), wantErr: true},
		{argv: strings.Fields("/agnhost connect 10.0.0.3"), wantErr: true},
		{argv: strings.Fields("/agnhost connect 10.0.0.3:0"), wantErr: true},
		{argv: strings.Fields("/agnhost connect 10.0.0.3:65536"), wantErr: true},
		{argv: strings.Fields("/agnhost connect [fe80::1%eth0]:80"), wantErr: true},
		{argv: strings.Fields("/agnhost connect bad..name:80"), wantErr: true},
		{argv: strings.Fields("/agnhost connect bad/name:80"), wantErr: true},
		{argv: strings.Fields("/agnhost connect -dash.example:80"), wantErr: true},
		{argv: strings.Fields("/agnhost connect dash-.example:80"), wantErr: true},
		{argv: []string{"/agnhost", "connect", strings.Repeat("a", 64) + ".example:80"}, wantErr: true},
		{argv: []string{"/agnhost", "connect", strings.Repeat("abcdefg.", 32) + "example:80"}, wantErr: true},
		{argv: strings.Fields("/agnhost connect --timeout=1s"), wantErr: true},
		{argv: strings.Fields("/agnhost netexec --http-port=80"), wantErr: true},
		{argv: []string{"/bin/sh", "-c", "/agnhost connect 10.0.0.3:80"}, wantErr: true},
		{argv: nil, wantErr: true},
	} {
		got, err := parseConnect(tc.argv)
		if (err != nil) != tc.wantErr {
			t.Errorf("%q: err %v, wantErr %v", tc.argv, err, tc.wantErr)
			continue
		}
		if err == nil && got != tc.want {
			t.Errorf("%q: got %+v, want %+v", tc.argv, got, tc.want)
		}
	}
}

func TestParseTestJSON(t *testing.T) {
	const run = `{"Action":"run","Test":"TestNftguardConformance"}
{"Action":"run","Test":"TestNftguardConformance/CNPAdminTierIngressSCTP"}
{"Action":"output","Test":"TestNftguardConformance/CNPAdminTierIngressSCTP/deny","Output":"    helper.go:110: Expected connection to fail from a/b to 10.0.0.1, but instead it successfully connected.\n"}
{"Action":"output","Test":"TestNftguardConformance/CNPAdminTierIngressSCTP/allow","Output":"    helper.go:100: Expected connection to succeed from a/b to 10.0.0.1, but instead it miserably failed. stderr: TIMEOUT\n"}
{"Action":"output","Test":"TestNftguardConformance/CNPAdminTierIngressSCTP/allow","Output":"    helper.go:118: Expected connection to be dropped from a/b to 10.0.0.1, but instead it returned a different status: REFUSED\n"}
{"Action":"fail","Test":"TestNftguardConformance/CNPAdminTierIngressSCTP/deny","Elapsed":1}
{"Action":"pass","Test":"TestNftguardConformance/CNPAdminTierIngressSCTP/allow","Elapsed":1}
{"Action":"fail","Test":"TestNftguardConformance/CNPAdminTierIngressSCTP","Elapsed":2}
{"Action":"skip","Test":"TestNftguardConformance/CNPOther","Elapsed":0}
{"Action":"pass","Test":"TestNftguardConformance/CNPThird","Elapsed":0}
{"Action":"fail","Test":"TestNftguardConformance","Elapsed":3}
{"Action":"fail","Elapsed":3}
`
	res, err := parseTestJSON(strings.NewReader(run))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Passed) != 2 || len(res.Failed) != 3 || len(res.Skipped) != 1 || !res.PackageFailed || res.OK() {
		t.Errorf("passed %v failed %v skipped %v package failed %v", res.Passed, res.Failed, res.Skipped, res.PackageFailed)
	}
	// Only the failed subtest counts, by its last probe failure.
	if res.DenyLetThrough != 1 || res.AllowBlocked != 0 || res.DenyWrongStatus != 0 {
		t.Errorf("probe failures: %+v", res)
	}
	if !strings.Contains(res.Summary(time.Minute), "2 passed, 3 failed, 1 skipped (conformance tests: 1 passed, 1 failed, 1 skipped") {
		t.Errorf("summary: %s", res.Summary(time.Minute))
	}

	ok, err := parseTestJSON(strings.NewReader(`{"Action":"pass","Test":"TestNftguardConformance/A"}
{"Action":"pass","Test":"TestNftguardConformance"}
{"Action":"pass"}
`))
	if err != nil || !ok.OK() {
		t.Errorf("a clean run is not OK: %+v %v", ok, err)
	}
	for name, text := range map[string]string{
		"empty":       "",
		"build error": "# sigs.k8s.io/network-policy-api/conformance/nftguard\n./x.go:1: undefined: y\n",
		"only skips":  `{"Action":"skip","Test":"TestNftguardConformance"}` + "\n",
	} {
		res, err := parseTestJSON(strings.NewReader(text))
		if err != nil || res.OK() {
			t.Errorf("%s: OK=%v err=%v", name, res.OK(), err)
		}
	}
}
