//go:build race

package nexmark

// raceEnabled reports whether the tests run under the race detector, which
// slows the stores some tenfold (pebble's skiplist some thirtyfold): the
// tests then take shorter streams.
const raceEnabled = true
