package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftsyntax"
	"github.com/nftguard/nftguard/engine/nftwire"
)

// declKey is what decides whether an existing set can be kept (and only its
// elements changed) or must be recreated.
func (s *kernelSet) declKey() string {
	var sb strings.Builder
	var b [4]byte
	for _, v := range []uint32{s.flags, s.keyType, s.keyLen, s.dataType, s.dataLen} {
		binary.BigEndian.PutUint32(b[:], v)
		sb.Write(b[:])
	}
	for _, v := range s.fieldLens {
		binary.BigEndian.PutUint32(b[:], v)
		sb.Write(b[:])
	}
	sb.WriteString("|")
	sb.Write(s.userdata)
	return sb.String()
}

// sameDecl is declKey equality without building the keys (the diff
// compares every kept set): the two must list the same fields.
func sameDecl(a, b *kernelSet) bool {
	return a.flags == b.flags && a.keyType == b.keyType && a.keyLen == b.keyLen &&
		a.dataType == b.dataType && a.dataLen == b.dataLen &&
		slices.Equal(a.fieldLens, b.fieldLens) && bytes.Equal(a.userdata, b.userdata)
}

// contentKey is an anonymous set's identity: declaration plus elements.
func (s *kernelSet) contentKey() string {
	ids := make([]string, 0, len(s.elems))
	for id, e := range s.elems {
		ids = append(ids, id+"="+elemValue(e))
	}
	sort.Strings(ids)
	return s.declKey() + "|" + strings.Join(ids, ",")
}

func elemID(e nftwire.Elem) string {
	return string(appendElemID(make([]byte, 0, elemIDLen(e)), e))
}

func elemIDLen(e nftwire.Elem) int { return len(e.Key) + len(e.KeyEnd) + 3 }

func appendElemID(b []byte, e nftwire.Elem) []byte {
	end := byte('0')
	if e.IntervalEnd {
		end = '1'
	}
	b = append(b, e.Key...)
	b = append(b, 0)
	b = append(b, e.KeyEnd...)
	return append(b, 0, end)
}

// elemIDs returns elemID of every element. The ids are cut from one
// string, two allocations instead of one per element of a large set; the
// string lives as long as any of its ids, at most the size of the set's
// ids when it was compiled.
func elemIDs(elems []nftwire.Elem) []string {
	n := 0
	for _, e := range elems {
		n += elemIDLen(e)
	}
	all := make([]byte, 0, n)
	for _, e := range elems {
		all = appendElemID(all, e)
	}
	s := string(all)
	ids := make([]string, len(elems))
	off := 0
	for i, e := range elems {
		l := elemIDLen(e)
		ids[i] = s[off : off+l]
		off += l
	}
	return ids
}

func elemValue(e nftwire.Elem) string {
	if e.Verdict != nil {
		return fmt.Sprintf("v%d:%s|%s", e.Verdict.Kind, e.Verdict.Chain, e.UserData)
	}
	return string(e.Data) + "|" + string(e.UserData)
}

// typeLen and typeMagic give a key/data type's kernel length and nft
// datatype id (concatenations are register-aligned and shifted 6 bits per
// field, as nft does).
func typeLen(t nftsyntax.Type) uint32 {
	if len(t.Fields) == 1 {
		return t.Fields[0].Len
	}
	var n uint32
	for _, f := range t.Fields {
		n += (f.Len + 3) &^ 3
	}
	return n
}

func typeMagic(t nftsyntax.Type) uint32 {
	var m uint32
	for _, f := range t.Fields {
		m = m<<6 | f.Magic
	}
	return m
}

func isVerdictType(t *nftsyntax.Type) bool {
	return t != nil && len(t.Fields) == 1 && t.Fields[0].Name == "verdict"
}

// setFromDecl builds the kernel form of a set declaration; anonymous sets
// carry the flags nft gives them.
func setFromDecl(d nftsyntax.SetDecl, anonymous bool, userdata []byte) *kernelSet {
	s := &kernelSet{
		name:     d.Name,
		keyType:  typeMagic(d.Key),
		keyLen:   typeLen(d.Key),
		userdata: userdata,
		elems:    map[string]nftwire.Elem{},
	}
	if anonymous {
		s.flags |= unix.NFT_SET_ANONYMOUS | unix.NFT_SET_CONSTANT
	}
	if d.Interval {
		s.flags |= unix.NFT_SET_INTERVAL
	}
	if d.Timeout {
		s.flags |= unix.NFT_SET_TIMEOUT
	}
	// nft describes the fields (and flags the set) only for concatenated
	// intervals, where the kernel needs them to pick pipapo.
	if len(d.Key.Fields) > 1 && d.Interval {
		for _, f := range d.Key.Fields {
			s.fieldLens = append(s.fieldLens, f.Len)
		}
		s.flags |= nftSetConcat
	}
	if d.Data != nil {
		s.flags |= unix.NFT_SET_MAP
		if isVerdictType(d.Data) {
			s.dataType = nftDataVerdict
		} else {
			s.dataType = typeMagic(*d.Data)
			s.dataLen = typeLen(*d.Data)
		}
	}
	return s
}

func (s *kernelSet) add(e nftwire.Elem) string {
	id := elemID(e)
	s.addID(id, e)
	return id
}

// addID adds e under its id (elemID); a later element with the same id
// replaces the earlier one but keeps its place in order.
func (s *kernelSet) addID(id string, e nftwire.Elem) {
	s.compiled, s.compiledTexts = nil, nil
	n := len(s.elems)
	s.elems[id] = e
	if len(s.elems) > n {
		s.order = append(s.order, id)
	}
}
