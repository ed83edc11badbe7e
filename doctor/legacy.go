package doctor

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/nfnl"
)

// The x_tables getsockopt interface (linux/netfilter_ipv4/ip_tables.h):
// IPT_SO_GET_INFO and IP6T_SO_GET_INFO are both IPT_BASE_CTL.
const (
	soGetInfo   = 64
	getInfoSize = 32 + 4 + 5*4 + 5*4 + 4 + 4 // struct ipt_getinfo
)

// readLegacy lists the iptables-legacy tables of the namespace and how many
// entries beyond their built-in policies each holds. It reads the table
// list first and asks only about tables that exist: asking about another
// would make the kernel create it, which is a write.
func readLegacy(path string) ([]LegacyTable, error) {
	var out []LegacyTable
	var errs []error
	err := nfnl.InNetNS(path, func() error {
		for _, fam := range []struct {
			name, file  string
			domain, lvl int
		}{
			{"ip", "ip_tables_names", unix.AF_INET, unix.SOL_IP},
			{"ip6", "ip6_tables_names", unix.AF_INET6, unix.SOL_IPV6},
		} {
			// thread-self: /proc/self/net would show the namespace of
			// the process's main thread, not of this one.
			names, err := readNames("/proc/thread-self/net/" + fam.file)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for _, n := range names {
				rules, err := legacyEntries(fam.domain, fam.lvl, n)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s table %s: %w", fam.name, n, err))
					rules = -1
				}
				out = append(out, LegacyTable{Family: fam.name, Name: n, Rules: rules})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, errors.Join(errs...)
}

// readNames reads a table list; a missing file means the x_tables module of
// that family is not loaded, so there are no legacy tables.
func readNames(path string) ([]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if n := strings.TrimSpace(sc.Text()); n != "" {
			out = append(out, n)
		}
	}
	return out, sc.Err()
}

// legacyEntries asks the kernel for a table's struct ipt_getinfo and
// returns the number of entries beyond one policy per built-in chain and
// the closing error entry: rules plus user chains (each of those adds two).
func legacyEntries(domain, level int, table string) (int, error) {
	fd, err := unix.Socket(domain, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err != nil {
		return 0, fmt.Errorf("raw socket: %w", err)
	}
	defer unix.Close(fd)
	buf := make([]byte, getInfoSize)
	copy(buf, table)
	n := uint32(len(buf))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), soGetInfo,
		uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
	if e != 0 {
		return 0, fmt.Errorf("getsockopt SO_GET_INFO: %w", e)
	}
	return parseGetInfo(buf)
}

func parseGetInfo(b []byte) (int, error) {
	if len(b) < getInfoSize {
		return 0, fmt.Errorf("short ipt_getinfo (%d bytes)", len(b))
	}
	hooks := binary.NativeEndian.Uint32(b[32:])
	entries := binary.NativeEndian.Uint32(b[32+4+40:])
	extra := int(entries) - bits.OnesCount32(hooks) - 1
	return max(extra, 0), nil
}
