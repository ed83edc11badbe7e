//go:build !nftguard_testhooks

package agent

import "github.com/nftguard/nftguard/compose"

// testInjector is nil in every build but the tests' (see testhook.go).
func testInjector() func(compose.Input, *compose.Result) { return nil }
