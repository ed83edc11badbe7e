package main

import (
	"fmt"
	"time"
)

// profile bounds a run: which sizes each scenario measures, how often, and
// for how long the data-path load runs.
type profile struct {
	Name       string
	Reps       int
	Scale      []size        // scenario 1
	Change     []size        // scenario 2
	DataPath   []int         // scenario 3: policies selecting other pods
	LoadFor    time.Duration // scenario 3: per direction and protocol
	DPReps     int           // scenario 3: repetitions (labs); Reps if 0
	MicroBench string        // scenario 5: -bench pattern ("" skips)
	MicroTime  string        // scenario 5: -benchtime ("" = go test's default)
	Churn      int           // scenario 4: pod changes after the first sync (0 skips)
	// Scenario 6, the denied-traffic log: allowed traffic with logging
	// on vs off at DeniedPolicies (0 skips the scenario), and the agent's
	// CPU at each log rate of DeniedRates, DeniedFor per window.
	DeniedPolicies int
	DeniedRates    []int
	DeniedFor      time.Duration
}

var (
	s1k  = size{Pods: 1000, Policies: 100}
	s10k = size{Pods: 10000, Policies: 1000}
	s50k = size{Pods: 50000, Policies: 5000}
)

// profiles returns the named profile: full for `make bench`, quick for
// regular use (< 5 min), smoke to keep the program working in CI (< 60 s).
func profiles(name string) (profile, error) {
	switch name {
	case "full":
		return profile{Name: name, Reps: 3, Scale: []size{s1k, s10k, s50k}, Change: []size{s1k, s10k, s50k},
			DataPath: []int{0, 100, 1000, 10000}, LoadFor: 4 * time.Second, DPReps: 5, MicroBench: ".", Churn: 3600,
			DeniedPolicies: 1000, DeniedRates: []int{1000, 5000}, DeniedFor: 10 * time.Second}, nil
	case "quick":
		return profile{Name: name, Reps: 3, Scale: []size{s1k, s10k}, Change: []size{s1k, s10k},
			DataPath: []int{0, 100, 1000}, LoadFor: 2 * time.Second, MicroBench: "Compile50k|OneChange", MicroTime: "1x", Churn: 1200,
			DeniedPolicies: 1000, DeniedRates: []int{1000}, DeniedFor: 5 * time.Second}, nil
	case "smoke":
		tiny := size{Pods: 500, Policies: 50}
		return profile{Name: name, Reps: 1, Scale: []size{tiny}, Change: []size{tiny},
			DataPath: []int{0, 20}, LoadFor: 500 * time.Millisecond,
			DeniedPolicies: 20}, nil // the agent-CPU part (an API server, a build) would double the smoke run
	}
	return profile{}, fmt.Errorf("unknown profile %q (full, quick or smoke)", name)
}

// dpReps is how many labs scenario 3 measures in.
func (p profile) dpReps() int {
	if p.DPReps == 0 {
		return p.Reps
	}
	return p.DPReps
}
