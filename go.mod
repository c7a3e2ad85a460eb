module github.com/stategen/stategen

go 1.26.0

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/dave/jennifer v1.7.1
	github.com/google/go-cmp v0.7.0
	github.com/tinylib/msgp v1.6.5
	golang.org/x/tools v0.52.0
)

require (
	github.com/philhofer/fwd v1.2.0 // indirect
	github.com/tidwall/btree v1.8.2 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
)
