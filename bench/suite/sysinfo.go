package main

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// machine describes where the numbers were measured.
type machine struct {
	Date            time.Time
	CPUs            int
	CPUModel        string
	Memory          string
	Kernel          string
	Nft, IPTables   string
	Go              string
	Commit          string // of the measured tree
	LoadAvgAtStart  string
	LoadAvgAtFinish string
}

func describeMachine() machine {
	return machine{
		Date:           time.Now().UTC(),
		CPUs:           runtime.NumCPU(),
		CPUModel:       procField("/proc/cpuinfo", "model name"),
		Memory:         procField("/proc/meminfo", "MemTotal"),
		Kernel:         firstLine(output("uname", "-sr")),
		Nft:            firstLine(output("nft", "--version")),
		IPTables:       firstLine(output("iptables-nft", "--version")),
		Go:             runtime.Version(),
		LoadAvgAtStart: loadAvg(),
	}
}

// commit names the measured tree: HEAD, and whether files differ from it
// (other work in progress is measured too).
func commit(root string) string {
	head := firstLine(output("git", "-C", root, "rev-parse", "--short", "HEAD"))
	if strings.TrimSpace(output("git", "-C", root, "status", "--porcelain", "--untracked-files=no")) != "" {
		head += " with uncommitted changes"
	}
	return head
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// procField returns the value of the first "key: value" line of a /proc
// file.
func procField(path, key string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func output(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return string(out)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}
