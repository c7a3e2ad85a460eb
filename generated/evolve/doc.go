// Package evolve tests schema evolution end to end: the state of a job as
// it was (package v1), as it is after a week of compatible changes to its
// types (package v2), and after an incompatible one (package bad), each
// with the code stategen generated for it. Its tests write checkpoints
// with v1's code and restore them with v2's on every backend, comparing
// every value with what v2's types must hold; its benchmark compares a
// restore that migrates with one that does not (BenchmarkRestoreMigrate).
package evolve
