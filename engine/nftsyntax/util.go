package nftsyntax

import "fmt"

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// maskBytes keeps the first bits of v and zeroes the rest.
func maskBytes(v []byte, bits int) []byte {
	out := make([]byte, len(v))
	for i := range v {
		switch {
		case bits >= 8*(i+1):
			out[i] = v[i]
		case bits > 8*i:
			out[i] = v[i] & ^byte(0xff>>(bits-8*i))
		}
	}
	return out
}

// prefixMask is the netmask of bits on n bytes.
func prefixMask(n, bits int) []byte {
	ones := make([]byte, n)
	for i := range ones {
		ones[i] = 0xff
	}
	return maskBytes(ones, bits)
}
