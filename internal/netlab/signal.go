package netlab

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// live is the registry of open labs, the package's only mutable global: a
// signal handler has no other way to find what it must remove before the
// process dies.
var live struct {
	sync.Mutex
	labs map[*Lab]struct{}
	once sync.Once
}

func register(l *Lab) {
	live.once.Do(installSignalHandler)
	live.Lock()
	defer live.Unlock()
	if live.labs == nil {
		live.labs = map[*Lab]struct{}{}
	}
	live.labs[l] = struct{}{}
}

func unregister(l *Lab) {
	live.Lock()
	defer live.Unlock()
	delete(live.labs, l)
}

// installSignalHandler makes SIGINT and SIGTERM close every open lab and
// then kill the process with the same signal, so an interrupted test run
// leaves no namespaces behind and still exits the way the signal demands.
// Programs that use netlab and handle these signals themselves should Close
// their labs on their own path; this handler runs too and ends the process.
func installSignalHandler() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-ch
		live.Lock()
		labs := make([]*Lab, 0, len(live.labs))
		for l := range live.labs {
			labs = append(labs, l)
		}
		live.Unlock()
		for _, l := range labs {
			if err := l.Close(); err != nil {
				os.Stderr.WriteString("netlab: " + err.Error() + "\n")
			}
		}
		signal.Reset(sig.(syscall.Signal))
		syscall.Kill(os.Getpid(), sig.(syscall.Signal))
		time.Sleep(time.Second) // the signal is delivered asynchronously
		os.Exit(1)
	}()
}

// CallerHandlesSignals keeps labs from installing their SIGINT/SIGTERM
// handler, for a program that cancels its work on those signals and closes
// its labs itself on the way out: the demo, which must also stop the
// processes it started and remove their files, which the handler (it ends
// the process) would not wait for. Call it before the first Create; once
// the handler is installed it has no effect.
func CallerHandlesSignals() { live.once.Do(func() {}) }
