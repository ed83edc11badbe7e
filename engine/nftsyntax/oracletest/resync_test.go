package oracletest

import (
	"testing"
	"time"
)

// resyncBefore and resyncAfter are the same sets with different elements:
// the engine syncs before, then after (an incremental element diff), and the
// result must equal what nft -f writes for after alone.
var resyncBefore = []setCase{
	{name: "r4i", key: "ipv4_addr", interval: true, elems: keys("10.0.0.0/8", "192.168.0.0/16", "240.0.0.0-255.255.255.255")},
	{name: "r4i0", key: "ipv4_addr", interval: true, elems: keys("10.0.0.1")},
	{name: "r4", key: "ipv4_addr", elems: keys("10.0.0.1", "10.0.0.2")},
	{name: "r6i", key: "ipv6_addr", interval: true, elems: keys("fd00::/64", "ff00::/8")},
	{name: "rsvi", key: "inet_service", interval: true, elems: keys("0-1023", "8080")},
	{name: "rc3i", key: "ipv4_addr . inet_proto . inet_service", interval: true, elems: keys("10.0.0.0/8 . tcp . 80-90", "1.1.1.1 . udp . 53")},
	{name: "rvm", key: "ipv4_addr", data: "verdict", elems: kv("10.0.0.1", "jump a", "10.0.0.2", "drop")},
	{name: "rvmi", key: "ipv4_addr", data: "verdict", interval: true, elems: kv("10.0.0.0/8", "jump a", "11.0.0.0/8", "drop")},
	{name: "ram", key: "ipv4_addr", data: "ipv4_addr", elems: kv("10.0.0.1", "192.0.2.1", "10.0.0.2", "192.0.2.2")},
	{name: "rifi", key: "ifname", interval: true, elems: keys(`"veth*"`, `"eth0"`)},
	{name: "rempty", key: "ipv4_addr", interval: true, elems: keys("10.0.0.0/8", "0.0.0.0/8")},
	{name: "rami", key: "ipv4_addr", data: "ipv4_addr", interval: true, elems: kv("10.0.0.0/8", "192.0.2.1", "172.16.0.1-172.16.0.9", "192.0.2.2")},
	{name: "ram6i", key: "ipv6_addr", data: "ipv6_addr", interval: true, elems: kv("fd00::/64", "2001:db8::1", "::/8", "2001:db8::2")},
	{name: "rsv0", key: "inet_service", interval: true, elems: keys("80")},
	{name: "r4top", key: "ipv4_addr", interval: true, elems: keys("0.0.0.0/8", "240.0.0.0-255.255.255.255")},
	{name: "rvmi0", key: "inet_service", data: "verdict", interval: true, elems: kv("0-1023", "jump a", "8080", "drop")},
	{name: "rmki", key: "mark", interval: true, elems: keys("0x00000010", "0x00000100")},
}

var resyncAfter = []setCase{
	// Shrink one interval, drop the one running to the top, add one at 0.
	{name: "r4i", key: "ipv4_addr", interval: true, elems: keys("10.0.0.0/16", "192.168.0.0/16", "0.0.0.0/8")},
	// Add an interval that starts at zero after a set that had a sentinel.
	{name: "r4i0", key: "ipv4_addr", interval: true, elems: keys("0.0.0.0-10.0.0.1")},
	{name: "r4", key: "ipv4_addr", elems: keys("10.0.0.2", "10.0.0.3")},
	{name: "r6i", key: "ipv6_addr", interval: true, elems: keys("fd00::/56", "::1")},
	// Two adjacent intervals where one was.
	{name: "rsvi", key: "inet_service", interval: true, elems: keys("0-511", "512-1023", "8080-8081")},
	{name: "rc3i", key: "ipv4_addr . inet_proto . inet_service", interval: true, elems: keys("10.0.0.0/8 . tcp . 80-91", "1.1.1.1 . udp . 53")},
	// Same keys, new verdicts.
	{name: "rvm", key: "ipv4_addr", data: "verdict", elems: kv("10.0.0.1", "goto b", "10.0.0.2", "drop")},
	{name: "rvmi", key: "ipv4_addr", data: "verdict", interval: true, elems: kv("10.0.0.0/8", "jump b", "11.0.0.0/8", "drop")},
	// Same key, new address.
	{name: "ram", key: "ipv4_addr", data: "ipv4_addr", elems: kv("10.0.0.1", "192.0.2.9", "10.0.0.2", "192.0.2.2")},
	{name: "rifi", key: "ifname", interval: true, elems: keys(`"vet*"`, `"eth0"`)},
	{name: "rempty", key: "ipv4_addr", interval: true},
	// Interval data maps: a new value for a kept interval, an interval
	// replacing the zero sentinel, an adjacent interval below a kept one.
	{name: "rami", key: "ipv4_addr", data: "ipv4_addr", interval: true, elems: kv("10.0.0.0/8", "192.0.2.9", "0.0.0.0/8", "192.0.2.2")},
	{name: "ram6i", key: "ipv6_addr", data: "ipv6_addr", interval: true, elems: kv("fd00::/64", "2001:db8::1", "::/8", "2001:db8::3", "fd01::/64", "2001:db8::4")},
	// The new end is the old start; the sentinel goes.
	{name: "rsv0", key: "inet_service", interval: true, elems: keys("0-79")},
	// The sentinel comes; the open interval at the top moves.
	{name: "r4top", key: "ipv4_addr", interval: true, elems: keys("10.0.0.0/8", "250.0.0.0-255.255.255.255")},
	// Split a verdict interval and change a verdict.
	{name: "rvmi0", key: "inet_service", data: "verdict", interval: true, elems: kv("0-511", "jump a", "512-1023", "goto b", "8080", "accept")},
	{name: "rmki", key: "mark", interval: true, elems: keys("0x00000000", "0x00000100", "0x00000011")},
}

// TestOracleSetsResync checks the engine's element diff: after an
// incremental sync, the kernel's copy equals nft's for the final elements.
func TestOracleSetsResync(t *testing.T) {
	start := time.Now()
	runSetBatch(t, resyncAfter, resyncBefore, false)
	t.Logf("%d resync cases in %v", len(resyncAfter), time.Since(start).Round(time.Millisecond))
}

// TestOracleSetsResyncFresh is the same with the final sync done by a new
// Engine, whose diff starts from a read of the kernel's table.
func TestOracleSetsResyncFresh(t *testing.T) {
	start := time.Now()
	runSetBatch(t, resyncAfter, resyncBefore, true)
	t.Logf("%d resync cases in %v", len(resyncAfter), time.Since(start).Round(time.Millisecond))
}
