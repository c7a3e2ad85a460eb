// Package generated holds example state declarations and the code stategen
// generates for them (stategen_state.gen.go, stategen_state.gen_test.go).
//
// The declarations cover every state kind, keyed and sub-keyed, and every
// type family the generator supports; the generated code is checked in, so
// that every change to the generator shows up in review as a change to this
// package, and CI fails if it is stale (stategen -check ./generated/...).
// Tests, fuzz targets and benchmarks use these codecs.
package generated

//go:generate go run github.com/stategen/stategen/cmd/stategen
