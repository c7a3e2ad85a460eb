package nestedchan

import "github.com/stategen/stategen/runtime"

//stategen:state
type S struct {
	F runtime.Value[string, Event]
}

type Event struct {
	ID  int64
	Out chan<- Event
}
