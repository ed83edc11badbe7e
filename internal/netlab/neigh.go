package netlab

import (
	"errors"
	"fmt"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// FlushNeighbours empties the neighbour caches (ARP and IPv6 neighbour
// discovery) of every node, pod and external host, so that the next probes
// resolve their neighbours again through whatever firewall is in place: a
// cached entry learnt before a policy was applied would otherwise hide a
// policy that breaks resolution. Permanent and no-ARP entries (multicast,
// loopback) are kept.
func (l *Lab) FlushNeighbours() error {
	l.mu.Lock()
	paths := make([]string, 0, len(l.names))
	for _, n := range l.names {
		paths = append(paths, NetNSDir+"/"+n)
	}
	l.mu.Unlock()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, path := range paths {
		wg.Go(func() {
			if err := l.flushNeighbours(path); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (l *Lab) flushNeighbours(path string) error {
	nl, err := l.openLink(path)
	if err != nil {
		return err
	}
	defer nl.close()
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		neighs, err := nl.h.NeighList(0, fam)
		if err != nil {
			return fmt.Errorf("list neighbours in %s: %w", path, err)
		}
		for _, n := range neighs {
			if n.State&(netlink.NUD_PERMANENT|netlink.NUD_NOARP) != 0 {
				continue
			}
			// An entry the kernel removed meanwhile is flushed too.
			if err := nl.h.NeighDel(&n); err != nil && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("delete neighbour %s in %s: %w", n.IP, path, err)
			}
		}
	}
	return nil
}

// FlushConntrack empties the connection tracking table of every node, so
// that a probe is a new flow even if an earlier probe of the same pair
// happened to use the same source port while a policy allowed it (an
// established flow outlives a policy change, by design).
func (l *Lab) FlushConntrack() error {
	var errs []error
	for _, n := range l.Nodes {
		nl, err := l.openLink(n.Path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := nl.h.ConntrackTableFlush(netlink.ConntrackTable); err != nil {
			errs = append(errs, fmt.Errorf("flush conntrack of node %s: %w", n.Name, err))
		}
		nl.close()
	}
	return errors.Join(errs...)
}
