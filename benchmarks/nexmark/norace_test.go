//go:build !race

package nexmark

// raceEnabled reports whether the tests run under the race detector.
const raceEnabled = false
