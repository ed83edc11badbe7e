# nftguard — the two set-up commands in README.md are `make demo` and `make test`.
# Both install what they need first (Debian packages, Go modules), so they
# work on a fresh Debian machine as root.

GO      ?= go
# podman and runc run the image in e2e TestImage (crun, podman's other
# runtime, refuses a hybrid cgroup v1 layout).
DEB_PKGS = nftables iptables iproute2 conntrack util-linux ipset podman runc

.PHONY: all build deps demo demo-apply test unit verify vet staticcheck bench-engine clean image

all: build

build:
	CGO_ENABLED=0 $(GO) build -o bin/nftguard ./cmd/nftguard

# deps installs the test oracles and baselines (nft, iptables-nft, ipset,
# iptables-legacy, conntrack, nsenter) and downloads the Go modules.
deps:
	@missing=""; for p in $(DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	$(GO) mod download
	cd hack/image && $(GO) mod download

# image builds the container image offline (hack/image, its own Go module so
# that go-containerregistry stays out of nftguard's go.mod): the static binary
# for each of IMAGE_ARCH in an empty image, reproducible (the same commit gives
# the same digest; SOURCE_DATE_EPOCH overrides the commit's time), written to
# bin/image/oci (an OCI layout) and bin/image/nftguard-$(VERSION).oci.tar
# (podman load -i, ctr -n k8s.io images import). The tag is the VERSION file.
IMAGE_ARCH ?= amd64,arm64
image:
	rm -rf bin/image
	cd hack/image && $(GO) run . -src ../.. -out ../../bin/image -arch $(IMAGE_ARCH)

# demo runs the agent (nftguard run on two lab nodes) against a real
# kube-apiserver and etcd: the first run builds them (make k8sbins, about
# 15 minutes on 2 cores, said on the terminal while it runs); then the demo
# takes about 15 s. demo-apply is the one-shot walkthrough of examples/
# with nftguard apply, no API server.
demo: deps build k8sbins
	$(GO) run ./demo

demo-apply: deps build
	$(GO) run ./demo apply

# unit is the inner loop: the pure tests only, no root, no kernel, no API
# server (kernel tests skip without NFTGUARD_KERNEL_TESTS=1, which this
# clears), the randomised tests at their -short sizes, and not e2e/, whose
# tests run the built binary (make test runs them). go test's cache keeps a
# re-run to the packages that changed.
unit:
	NFTGUARD_KERNEL_TESTS= $(GO) test -short $$($(GO) list ./... | grep -v '/e2e')

# verify is every static check: vet (and gofmt, go mod tidy -diff), then
# staticcheck, pinned, run from the module proxy (no install step; its
# version must support the go.mod's Go version). make test runs it first.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
verify: vet staticcheck

staticcheck:
	$(GO) run $(STATICCHECK) ./...
	cd hack/image && $(GO) run $(STATICCHECK) ./...
	$(GO) run $(STATICCHECK) -tags nftguard_testhooks ./agent

# The e2e tests build the agent with its test hooks: vet that build too.
vet:
	$(GO) vet ./...
	$(GO) vet -tags nftguard_testhooks ./agent
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not what go mod tidy writes: run go mod tidy"; exit 1; }
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	cd hack/image && $(GO) vet ./...
	@cd hack/image && $(GO) mod tidy -diff || { echo "hack/image/go.mod is not what go mod tidy writes"; exit 1; }

# test runs the static checks (verify), then every test against the real
# kernel in throw-away network namespaces; hack/gotest sets the kernel-test switch (NFTGUARD_KERNEL_TESTS=1,
# internal/kerneltest) and fails the run if any test was skipped. Then the
# nft syntax parser is fuzzed for a bounded time (FUZZTIME=10m for a long run),
# and the benchmark suite runs at tiny sizes so it keeps working.
# The agent e2e tests run twice: first as the agents' default finds the lab
# (no controller: every Pod watched), then with the lab's agents reading
# PeerSlices from a real `nftguard controller` (NFTGUARD_E2E_PEER_SOURCE=slices,
# ≈6 min more). Skipped there: the tests that set up both sources
# themselves, and those that run no lab agent.
FUZZTIME ?= 30s
AGENT_SLICES_SKIP := ^(TestAgentPeerSlices|TestAgentSlicesFailover|TestAgentBinaryStatic|TestAgentMemoryBudget)$$
test: deps verify k8sbins
	hack/gotest ./...
	NFTGUARD_E2E_PEER_SOURCE=slices hack/gotest ./e2e -run '^TestAgent' -skip '$(AGENT_SLICES_SKIP)'
	cd hack/image && $(GO) test -count=1 ./...
	$(GO) test ./engine/nftsyntax/ -run '^$$' -fuzz '^FuzzCompileRule$$' -fuzztime $(FUZZTIME)
	$(MAKE) bench-smoke

# bench-engine compares the engine with nft -f, iptables-nft-restore and the
# save|edit|restore cycle (bounded profile; BENCH_FLAGS=-full for 50k rules).
bench-engine: deps
	$(GO) run ./bench/engine $(BENCH_FLAGS)

# bench runs the benchmark suite (bench/suite, its own Go module so that the
# plotting library stays out of nftguard's go.mod) and writes
# bench/results/REPORT.md with PNG plots. BENCH_PROFILE=full (default),
# quick (1k/10k, < 5 min) or smoke.
BENCH_PROFILE ?= full
.PHONY: bench bench-smoke
bench: deps
	cd bench/suite && $(GO) run . -profile $(BENCH_PROFILE)

# bench-smoke keeps the suite working (CI): vet (the on-demand benchmemory
# measurements too), gofmt, then tiny sizes and one repetition, reported to
# bench/results/smoke/; then issue 37's slices path against the Pod watch at
# 600 pods (TestPeerSliceLoad, well under a minute): the slices must match
# the pods after churn and cost an agent less than the Pod watch.
bench-smoke: deps
	cd bench/suite && $(GO) vet . && $(GO) vet -tags benchmemory . && test -z "$$(gofmt -l .)"
	cd bench/suite && $(GO) run . -profile smoke -out ../results/smoke
	cd bench/suite && NFTGUARD_KERNEL_TESTS=1 NFTGUARD_BENCH_PEERSLICE=600 NFTGUARD_BENCH_PEERSLICE_LIVES=20 \
	  NFTGUARD_BENCH_PEERSLICE_SIZES=4,16 $(GO) test -tags benchmemory -run '^TestPeerSliceLoad$$' -count=1 -timeout 5m .

clean:
	rm -rf bin

# k8sbins builds kube-apiserver and etcd for the agent tests from Go modules
# into ~/.cache/nftguard-test/k8s-VERSION (~15 min cold; a no-op when cached).
.PHONY: k8sbins
k8sbins:
	GO=$(GO) hack/k8sbins/build.sh
