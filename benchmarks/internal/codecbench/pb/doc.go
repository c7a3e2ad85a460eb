// Package pb holds the values of the codec benchmarks for protobuf:
// codecbench.proto and the code protoc-gen-go and vtprotobuf's
// protoc-gen-go-vtproto generate from it (checked in; buf is the compiler,
// so no protoc is needed).
package pb

//go:generate go run github.com/bufbuild/buf/cmd/buf@v1.75.0 generate
