package rtnl

import (
	"net/netip"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

func TestOwnAddr(t *testing.T) {
	attrs := func(local, address string) []byte {
		ae := netlink.NewAttributeEncoder()
		if address != "" {
			ae.Bytes(unix.IFA_ADDRESS, netip.MustParseAddr(address).AsSlice())
		}
		if local != "" {
			ae.Bytes(unix.IFA_LOCAL, netip.MustParseAddr(local).AsSlice())
		}
		ae.String(unix.IFA_LABEL, "eth0")
		b, err := ae.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		name  string
		attrs []byte
		want  string // "" for none
		err   bool
	}{
		{"broadcast IPv4: both equal", attrs("10.0.0.1", "10.0.0.1"), "10.0.0.1", false},
		{"point-to-point IPv4: IFA_ADDRESS is the far end", attrs("10.0.0.1", "10.0.0.2"), "10.0.0.1", false},
		{"IPv6: IFA_ADDRESS only", attrs("", "fd00::1"), "fd00::1", false},
		{"IPv4-mapped is unmapped", attrs("::ffff:10.0.0.3", ""), "10.0.0.3", false},
		{"neither", attrs("", ""), "", false},
		{"truncated attribute", []byte{8, 0, 1}, "", true},
	} {
		got, err := OwnAddr(c.attrs)
		if (err != nil) != c.err {
			t.Errorf("%s: error %v, want error %v", c.name, err, c.err)
			continue
		}
		want := netip.Addr{}
		if c.want != "" {
			want = netip.MustParseAddr(c.want)
		}
		if got != want {
			t.Errorf("%s: %v, want %v", c.name, got, want)
		}
	}
}
