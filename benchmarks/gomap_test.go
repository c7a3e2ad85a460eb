package benchmarks

// The gomap baseline: the four states as plain Go maps of the Go values,
// with no encoding, no key groups and no snapshot support. It is the floor
// of in-memory point operations. A Go map cannot be snapshotted while it
// changes, so its snapshot is what a program without stategen does to
// checkpoint: stop and copy everything (maps.Clone, and a copy of every
// inner map), on the operator's goroutine.

import (
	"maps"
	"slices"
)

type goMap struct {
	values map[int64]Val
	lists  map[int64][]Val
	maps   map[int64]map[int64]Val
	sorted map[int64]map[int64]Val
	uks    []int64 // scratch of readRange
}

func newGoMap() *goMap {
	return &goMap{
		values: make(map[int64]Val),
		lists:  make(map[int64][]Val),
		maps:   make(map[int64]map[int64]Val),
		sorted: make(map[int64]map[int64]Val),
	}
}

func (g *goMap) getValue(k int64) (Val, bool, error) {
	v, ok := g.values[k]
	return v, ok, nil
}

func (g *goMap) putValue(k int64, v Val) error {
	g.values[k] = v
	return nil
}

// updateValue is the Go idiom, a read and a write of the map.
func (g *goMap) updateValue(k int64, fn func(Val, bool) Val) error {
	v, ok := g.values[k]
	g.values[k] = fn(v, ok)
	return nil
}

func (g *goMap) addList(k int64, v Val) error {
	g.lists[k] = append(g.lists[k], v)
	return nil
}

func (g *goMap) addAllList(k int64, vs []Val) error {
	g.lists[k] = append(g.lists[k], vs...)
	return nil
}

func (g *goMap) updateList(k int64, vs []Val) error {
	g.lists[k] = append([]Val(nil), vs...)
	return nil
}

func (g *goMap) readList(k int64) (int, error) {
	l := g.lists[k]
	for _, v := range l {
		sink = v
	}
	return len(l), nil
}

func (g *goMap) getMap(k, uk int64) (Val, bool, error) {
	v, ok := g.maps[k][uk]
	return v, ok, nil
}

func (g *goMap) putMap(k, uk int64, v Val) error {
	putInner(g.maps, k, uk, v)
	return nil
}

func putInner(m map[int64]map[int64]Val, k, uk int64, v Val) {
	in := m[k]
	if in == nil {
		in = make(map[int64]Val)
		m[k] = in
	}
	in[uk] = v
}

// updateMap is the Go idiom, a read and a write of the inner map.
func (g *goMap) updateMap(k, uk int64, fn func(Val, bool) Val) error {
	v, ok := g.maps[k][uk]
	putInner(g.maps, k, uk, fn(v, ok))
	return nil
}

func (g *goMap) containsMap(k, uk int64) (bool, error) {
	_, ok := g.maps[k][uk]
	return ok, nil
}

func (g *goMap) deleteMap(k, uk int64) error {
	if in := g.maps[k]; in != nil {
		delete(in, uk)
		if len(in) == 0 {
			delete(g.maps, k)
		}
	}
	return nil
}

func (g *goMap) readMap(k int64, part mapPart) (int, error) {
	in := g.maps[k]
	for uk, v := range in {
		switch part {
		case partKeys:
			sink.A = uk
		default:
			sink = v
		}
	}
	return len(in), nil
}

func (g *goMap) putSorted(k, uk int64, v Val) error {
	putInner(g.sorted, k, uk, v)
	return nil
}

func (g *goMap) readRange(k, from, to int64) (int, error) {
	in := g.sorted[k]
	g.uks = g.uks[:0]
	for uk := range in {
		if uk >= from && uk < to {
			g.uks = append(g.uks, uk)
		}
	}
	slices.Sort(g.uks)
	for _, uk := range g.uks {
		sink = in[uk]
	}
	return len(g.uks), nil
}

func (g *goMap) snapshot() (frozen, error) {
	c := &goMap{
		values: maps.Clone(g.values),
		lists:  maps.Clone(g.lists), // appends never write below a list's length
		maps:   cloneInner(g.maps),
		sorted: cloneInner(g.sorted),
	}
	return c, nil
}

func cloneInner(m map[int64]map[int64]Val) map[int64]map[int64]Val {
	c := make(map[int64]map[int64]Val, len(m))
	for k, in := range m {
		c[k] = maps.Clone(in)
	}
	return c
}

func (g *goMap) close() error { return nil }

// scan encodes every entry of a copy, as a checkpoint writer would.
func (g *goMap) scan() (entries, bytes int64, err error) {
	var buf []byte
	entry := func(k, uk int64, hasUK bool, v Val) {
		buf = int64Codec.AppendKey(buf[:0], k)
		if hasUK {
			buf = int64Codec.AppendKey(buf, uk)
		}
		buf = valCodec{}.AppendValue(buf, v)
		entries++
		bytes += int64(len(buf))
	}
	for k, v := range g.values {
		entry(k, 0, false, v)
	}
	for k, l := range g.lists {
		for _, v := range l {
			entry(k, 0, false, v)
		}
	}
	for _, m := range []map[int64]map[int64]Val{g.maps, g.sorted} {
		for k, in := range m {
			for uk, v := range in {
				entry(k, uk, true, v)
			}
		}
	}
	return entries, bytes, nil
}

func (g *goMap) release() error { return nil }
