package cycle

import "github.com/stategen/stategen/runtime"

//stategen:state
type S struct {
	F runtime.Value[string, Node]
}

type Node struct {
	Value int
	Next  *Node
}
