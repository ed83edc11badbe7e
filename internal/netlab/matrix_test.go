package netlab

import (
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"
)

func TestMatrix(t *testing.T) {
	pods := []string{"x/a", "x/b"}
	to := []string{"x/a", "x/b", "ext"}
	ports := []Port{{TCP, 80}, {UDP, 81}}
	want := NewMatrix(IPv4, pods, to, ports, true).ExpectTo("x/b", false, Port{TCP, 80}).Expect("x/b", "x/b", true)
	got := NewMatrix(IPv4, pods, to, ports, true).ExpectFrom("x/a", false, Port{TCP, 80}).Expect("x/a", "x/a", true, Port{TCP, 80})
	if diff := Compare(want, want); diff != "" {
		t.Errorf("matrix differs from itself:\n%s", diff)
	}
	diff := Compare(want, got)
	for s, present := range map[string]bool{
		"1 of 12 cells differ":                                 true,
		"tcp/80 IPv4 x/a -> ext: expected allowed, got denied": true,
		"x/a -> x/b": false, // denied in both
		"udp/81":     false, // no wrong cell, no table
	} {
		if strings.Contains(diff, s) != present {
			t.Errorf("diff should contain %q: %v\n%s", s, present, diff)
		}
	}
	const table = "tcp/80 IPv4 x/a x/b ext\n" +
		"x/a         .   X   .  \n" +
		"x/b         .   .   .  \n"
	if s := want.String(); !strings.HasPrefix(s, table) {
		t.Errorf("table:\n%s\nwant prefix:\n%s", s, table)
	}
}

func TestSCTPInit(t *testing.T) {
	// RFC 3720 B.4: CRC32c of 32 zero bytes.
	if got := crc32.Checksum(make([]byte, 32), castagnoli); got != 0x8a9136aa {
		t.Fatalf("crc32c = %#x", got)
	}
	pkt := sctpInit(40000, 81, 0xabcdef01)
	port, tag, ok := parseSCTPInit(pkt)
	if !ok || port != 81 || tag != 0xabcdef01 {
		t.Fatalf("parse: port %d tag %#x ok %v", port, tag, ok)
	}
	if vtag := binary.BigEndian.Uint32(pkt[4:]); vtag != 0 {
		t.Errorf("INIT verification tag %d, want 0", vtag)
	}
	pkt[20]++
	if _, _, ok := parseSCTPInit(pkt); ok {
		t.Error("corrupted INIT accepted")
	}
	ip := append([]byte{0x45, 0, 0, 52, 0, 0, 0, 0, 64, 132, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}, sctpInit(1, 2, 3)...)
	if body, ok := stripIPv4Header(ip); !ok || len(body) != 32 {
		t.Errorf("strip IPv4 header: %d bytes, ok %v", len(body), ok)
	}
}

func TestSpecValidate(t *testing.T) {
	for _, s := range []Spec{
		{},
		{Nodes: []NodeSpec{{Name: "n1", Pods: []string{"a"}}}},
		{Nodes: []NodeSpec{{Name: "n1", Pods: []string{"x/a", "x/a"}}}},
		{Nodes: []NodeSpec{{Name: "N1"}}},
		{Nodes: []NodeSpec{{Name: "n1"}}, External: []string{"n1"}},
		{Nodes: []NodeSpec{{Name: "n1"}}, Ports: []Port{{"icmp", 1}}},
		{Nodes: []NodeSpec{{Name: "n1"}}, Ports: []Port{{TCP, 0}}},
		{Nodes: []NodeSpec{{Name: "n1"}}, Tag: "Dmo"},
		{Nodes: []NodeSpec{{Name: "n1"}}, Tag: "dmo-x"},
		{Nodes: []NodeSpec{{Name: "n1"}}, Tag: "toolongtag"},
	} {
		if err := s.validate(); err == nil {
			t.Errorf("spec %+v accepted", s)
		}
	}
	if err := (Spec{Nodes: []NodeSpec{{Name: "n1"}}, Tag: "dmo"}).validate(); err != nil {
		t.Errorf("tag dmo refused: %v", err)
	}
}
