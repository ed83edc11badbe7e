package clusterpolicy

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/fqdn"
	"github.com/nftguard/nftguard/internal/cnptest"
	"github.com/nftguard/nftguard/internal/tabletest"
)

func toDomains(names ...string) v1beta1.ClusterNetworkPolicyEgressPeer {
	p := v1beta1.ClusterNetworkPolicyEgressPeer{}
	for _, n := range names {
		p.DomainNames = append(p.DomainNames, v1beta1.DomainName(n))
	}
	return p
}

// TestDomainNames: a domainNames rule looks the pod and destination up
// in a timeout set per list of names (shared by rules with the same
// names, whatever their order or case); the forwarder's table names the
// local subject pods (both addresses) and their rules in chain order; the
// redirect and the input accept cover exactly the subject pods and the
// cluster DNS.
func TestDomainNames(t *testing.T) {
	admin := cnp("admin-dns", v1beta1.AdminTier, 5, func(s *v1beta1.ClusterNetworkPolicySpec) {
		s.Subject = v1beta1.ClusterNetworkPolicySubject{Namespaces: sel("ns", "x")}
		s.Egress = []v1beta1.ClusterNetworkPolicyEgressRule{
			egress(accept, "stripe", []v1beta1.ClusterNetworkPolicyEgressPeer{toDomains("api.stripe.com", "*.S3.amazonaws.com.")}),
			egress(deny, "rest", []v1beta1.ClusterNetworkPolicyEgressPeer{toNets("0.0.0.0/0")}),
		}
	})
	base := cnp("base-dns", v1beta1.BaselineTier, 1, func(s *v1beta1.ClusterNetworkPolicySpec) {
		s.Subject = v1beta1.ClusterNetworkPolicySubject{Namespaces: sel("ns", "y")}
		s.Egress = []v1beta1.ClusterNetworkPolicyEgressRule{
			// The same names as admin-dns's first rule, reordered.
			egress(accept, "same", []v1beta1.ClusterNetworkPolicyEgressPeer{toDomains("*.s3.amazonaws.com", "API.stripe.com")}, cnptest.TCP(443)),
		}
	})
	in := cluster(admin, base)
	in.DNS = &DNS{
		Servers:  []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00:96::a")},
		Forward4: netip.MustParseAddrPort("192.168.0.1:9753"),
		Forward6: netip.MustParseAddrPort("[2001:db8::1]:9753"),
	}
	out := compileChecked(t, in)
	b := domainSetBase([]fqdn.Pattern{{Domain: "api.stripe.com"}, {Domain: "s3.amazonaws.com", Wildcard: true}})
	eq(t, "x/a admin egress", chainRules(t, out, "cnp_ae_x_a"), []string{
		"ip daddr 10.0.0.1 accept", "ip6 daddr fd00::1 accept",
		"ip saddr . ip daddr @" + b + "_4 goto np_ingress", "ip6 saddr . ip6 daddr @" + b + "_6 goto np_ingress",
		"ip daddr @cnp_admin-dns_eg1_net4 drop",
	})
	eq(t, "y/a baseline egress", chainRules(t, out, "cnp_be_y_a"), []string{
		"ip daddr 10.0.1.1 accept", "ip6 daddr fd00::1:1 accept",
		"ip saddr . ip daddr @" + b + "_4 tcp dport 443 goto np_ingress", "ip6 saddr . ip6 daddr @" + b + "_6 tcp dport 443 goto np_ingress",
	})
	var timeoutSets []string
	for _, s := range out.Sets {
		if s.Timeout {
			timeoutSets = append(timeoutSets, s.Name+" "+s.Type)
			if len(s.Elements) != 0 {
				t.Errorf("timeout set %s has elements %v in the desired table", s.Name, s.Elements)
			}
		}
	}
	eq(t, "timeout sets", timeoutSets, []string{b + "_4 ipv4_addr . ipv4_addr", b + "_6 ipv6_addr . ipv6_addr", "cnp_dns_alive inet_proto"})
	eq(t, "subjects4", setElems(t, out, "cnp_dns_subjects4"), []string{"10.0.0.1", "10.0.0.2", "10.0.1.1"})
	eq(t, "subjects6", setElems(t, out, "cnp_dns_subjects6"), []string{"fd00::1", "fd00::1:1", "fd00::2"})
	eq(t, "servers4", setElems(t, out, "cnp_dns_servers4"), []string{"10.96.0.10"})
	eq(t, "redirect", tabletest.Rules(tabletest.Chain(t, out.Chains, "cnp_dns_redirect")), []string{
		"meta l4proto { tcp, udp } th dport 53 ip saddr @cnp_dns_subjects4 ip daddr @cnp_dns_servers4 meta l4proto @cnp_dns_alive dnat ip to 192.168.0.1:9753",
		"meta l4proto { tcp, udp } th dport 53 ip6 saddr @cnp_dns_subjects6 ip6 daddr @cnp_dns_servers6 meta l4proto @cnp_dns_alive dnat ip6 to [2001:db8::1]:9753",
	})
	var input []string
	for _, r := range out.Tiers.Input {
		input = append(input, r.Rule)
	}
	eq(t, "input accepts", input, []string{
		"meta l4proto { tcp, udp } ip saddr @cnp_dns_subjects4 ip daddr 192.168.0.1 th dport 9753 accept",
		"meta l4proto { tcp, udp } ip6 saddr @cnp_dns_subjects6 ip6 daddr 2001:db8::1 th dport 9753 accept",
	})

	// The forwarder's table: x/a and x/b (admin-dns), y/a (base-dns);
	// x/c and the other nodes' pods are not local.
	tab := out.DNS
	if tab == nil {
		t.Fatal("no DNS table")
	}
	var pods []string
	for a, sub := range tab.Pods {
		var names []string
		for _, r := range sub.Rules {
			names = append(names, r.Policy+"/"+r.Set4)
		}
		pods = append(pods, a.String()+" "+strings.Join(names, ","))
	}
	slices.Sort(pods)
	eq(t, "table", pods, []string{
		"10.0.0.1 admin-dns/" + b + "_4", "10.0.0.2 admin-dns/" + b + "_4", "10.0.1.1 base-dns/" + b + "_4",
		"fd00::1 admin-dns/" + b + "_4", "fd00::1:1 base-dns/" + b + "_4", "fd00::2 admin-dns/" + b + "_4",
	})
	if want := []netip.AddrPort{netip.MustParseAddrPort("10.96.0.10:53"), netip.MustParseAddrPort("[fd00:96::a]:53")}; !slices.Equal(tab.Servers, want) {
		t.Errorf("servers %v, want %v", tab.Servers, want)
	}
	if s := tab.Lookup(netip.MustParseAddr("fd00::1:1")); s == nil || s.Addrs != [2]netip.Addr{netip.MustParseAddr("10.0.1.1"), netip.MustParseAddr("fd00::1:1")} {
		t.Errorf("y/a's subject %+v", s)
	}

	// With the node's pod ranges, addresses of them no pod has yet are
	// redirected too (pods starting), and the known set holds every
	// local pod with an address.
	in.DNS.Forward6 = netip.AddrPort{}
	in.Nodes[0].Spec.PodCIDRs = []string{"10.0.0.0/24", "fd00::/112"}
	out = compileChecked(t, in)
	eq(t, "redirect with ranges", tabletest.Rules(tabletest.Chain(t, out.Chains, "cnp_dns_redirect")), []string{
		"meta l4proto { tcp, udp } th dport 53 ip saddr @cnp_dns_subjects4 ip daddr @cnp_dns_servers4 meta l4proto @cnp_dns_alive dnat ip to 192.168.0.1:9753",
		"meta l4proto { tcp, udp } th dport 53 ip saddr @cnp_dns_ranges4 ip saddr != @cnp_dns_known4 ip daddr @cnp_dns_servers4 meta l4proto @cnp_dns_alive dnat ip to 192.168.0.1:9753",
	})
	eq(t, "known4", setElems(t, out, "cnp_dns_known4"), []string{"10.0.0.1", "10.0.0.2", "10.0.1.1"})
	eq(t, "ranges4", setElems(t, out, "cnp_dns_ranges4"), []string{"10.0.0.0/24"})
	if p := netip.MustParseAddr("10.0.0.99"); !out.DNS.Pending(p) || out.DNS.Pending(netip.MustParseAddr("10.0.0.1")) || out.DNS.Pending(netip.MustParseAddr("10.9.0.1")) {
		t.Error("Pending: want only a range address no subject has")
	}

	// Without a forwarder (apply, render): the sets and rules, no
	// redirect, no heartbeat set.
	in.DNS = nil
	out = compileChecked(t, in)
	for _, c := range out.Chains {
		if c.Name == chainDNSRedir {
			t.Error("redirect chain without a forwarder")
		}
	}
	for _, s := range out.Sets {
		if s.Name == SetAlive || s.Name == setSubjects4 {
			t.Errorf("set %s without a forwarder", s.Name)
		}
	}
	if len(out.Tiers.Input) != 0 || out.DNS == nil || len(out.DNS.Pods) != 6 {
		t.Errorf("without a forwarder: input %v, table %+v", out.Tiers.Input, out.DNS)
	}
}
