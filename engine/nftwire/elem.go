package nftwire

// Family is an nftables table family as the netlink API numbers it
// (unix.NFPROTO_INET, unix.NFPROTO_IPV4, unix.NFPROTO_IPV6).
type Family byte

// Elem is one set or map element in kernel form.
type Elem struct {
	Key []byte
	// KeyEnd is the closing key of a range in a concatenated interval set
	// (NFTA_SET_ELEM_KEY_END), nil otherwise.
	KeyEnd []byte
	// IntervalEnd marks the element that closes an interval in a
	// non-concatenated interval set (NFT_SET_ELEM_INTERVAL_END).
	IntervalEnd bool
	// Data is the map value for non-verdict maps.
	Data []byte
	// Verdict is the map value for verdict maps.
	Verdict *Verdict
	// UserData is NFTA_SET_ELEM_USERDATA; nft sets it on the start of an
	// interval that runs to the end of the key space (ElemOpenInterval),
	// because no closing element can be written for it.
	UserData []byte
}

// ElemOpenInterval is the element user data nft attaches to the start of
// an interval that runs to the top of the key space:
// NFTNL_UDATA_SET_ELEM_FLAGS (type 1, 4 bytes) = NFTNL_SET_ELEM_F_INTERVAL_OPEN.
// It is returned fresh each time, so no caller can change another's.
func ElemOpenInterval() []byte { return []byte{1, 4, 1, 0, 0, 0} }
