package entryidx

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestRecordSize holds RecordSize, which bounds an index's bytes, to the
// size of a Rec.
func TestRecordSize(t *testing.T) {
	if got := unsafe.Sizeof(Rec{}); got != RecordSize {
		t.Fatalf("a Rec is %d bytes; RecordSize says %d", got, RecordSize)
	}
}

// find returns the payload of the record of identity (h, a, b) whose Ref
// is ref's, or of any if ref is 0.
func find(x *Index, h uint64, a, b []byte, ref uint64) (*Rec, bool) {
	var p Probe
	p.Start(x, h, a, b)
	for p.Next() {
		if ref == 0 || p.Rec().Ref == ref {
			return p.Rec(), true
		}
	}
	return nil, false
}

// TestIndexAgreesWithAMap adds, sets and removes random records, with
// hashes of a few bits (long probe sequences, many identities sharing a
// hash) and identities that share their hash and bytes (told apart by
// Ref, as cow tells map entries apart by user key), against a Go map:
// every record of the map is found with its payload, none other is, and
// Len agrees. Resets come now and then; a small bound makes the index
// start over.
func TestIndexAgreesWithAMap(t *testing.T) {
	type id struct {
		h    uint64
		a, b string
		ref  uint64
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	var x Index
	model := map[id]uint32{}
	for op := range 200000 {
		k := id{h: uint64(r.IntN(16)) << 60, a: fmt.Sprint(r.IntN(8)), b: fmt.Sprint(r.IntN(3))[:r.IntN(2)], ref: uint64(1 + r.IntN(4))}
		var p Probe
		p.Start(&x, k.h, []byte(k.a), []byte(k.b))
		found := false
		for p.Next() {
			if p.Rec().Ref == k.ref {
				found = true
				break
			}
		}
		if _, ok := model[k]; ok != found {
			t.Fatalf("op %d: %v found %v, the model %v", op, k, found, ok)
		}
		switch c := r.IntN(10); {
		case c < 5 && !found:
			aux := r.Uint32()
			x.Add(&p, k.ref, aux, 4<<10)
			if len(model) > 0 && x.Len() == 1 {
				clear(model) // the index started over
			}
			model[k] = aux
		case c < 7 && found:
			aux := r.Uint32()
			p.Rec().Aux = aux
			model[k] = aux
		case c < 9 && found:
			x.Remove(&p)
			delete(model, k)
		case c == 9 && r.IntN(200) == 0:
			x.Reset()
			clear(model)
		}
		if x.Len() != len(model) {
			t.Fatalf("op %d: Len %d, the model holds %d", op, x.Len(), len(model))
		}
	}
	for k, aux := range model {
		if rec, ok := find(&x, k.h, []byte(k.a), []byte(k.b), k.ref); !ok || rec.Aux != aux {
			t.Fatalf("%v: found %v, aux %v; want %d", k, ok, rec, aux)
		}
	}
	n := 0
	x.Each(func(*Rec) { n++ })
	if n != len(model) {
		t.Fatalf("Each visits %d records, the model holds %d", n, len(model))
	}
}

// TestIndexBoundAndGenerations fills an index past its bound: it grows to
// the bound, then starts over with the records added since, which it
// finds; and a generation counter that wraps clears the records.
func TestIndexBoundAndGenerations(t *testing.T) {
	var x Index
	key := func(i int) []byte { return fmt.Appendf(nil, "key%05d", i) }
	hash := func(i int) uint64 { return uint64(i) * 0x9E3779B97F4A7C15 }
	starts := 0
	const n = 2000
	for i := range n {
		var p Probe
		p.Start(&x, hash(i), key(i), nil)
		if p.Next() {
			t.Fatalf("record %d is there before its Add", i)
		}
		before := x.Len()
		x.Add(&p, uint64(i+1), 0, 0)
		if x.Len() != before+1 {
			if x.Len() != 1 {
				t.Fatalf("add %d: %d records after %d", i, x.Len(), before)
			}
			starts++
		}
		if size := x.Cap() * RecordSize; size > MinBytes {
			t.Fatalf("add %d: the index is %d bytes, more than its bound %d", i, size, MinBytes)
		}
		if 4*x.Len() > 3*x.Cap() {
			t.Fatalf("add %d: %d records in %d", i, x.Len(), x.Cap())
		}
	}
	if starts == 0 {
		t.Fatalf("%d records fit an index bound to MinBytes", n)
	}
	if rec, ok := find(&x, hash(n-1), key(n-1), nil, 0); !ok || rec.Ref != n {
		t.Fatalf("the last record added: found %v, %v", ok, rec)
	}
	if _, ok := find(&x, hash(0), key(0), nil, 0); ok {
		t.Fatal("the first record survived the index starting over")
	}
	x.gen = ^uint16(0)
	for i := range x.recs {
		if x.recs[i].gen != 0 {
			x.recs[i].gen = x.gen
		}
	}
	x.Reset()
	if x.gen != 1 || x.Len() != 0 {
		t.Fatalf("after the generation wrapped: gen %d, Len %d", x.gen, x.Len())
	}
	x.Each(func(r *Rec) { t.Fatalf("record %q is live after the generation wrapped", r.Key[:r.KL]) })
	if _, ok := find(&x, hash(n-1), key(n-1), nil, 0); ok {
		t.Fatal("a record survived the generation wrapping")
	}
}

// TestIdentities checks that an identity's two parts are told apart from
// the same bytes split elsewhere, and that too long an identity is not
// added.
func TestIdentities(t *testing.T) {
	var x Index
	var p Probe
	p.Start(&x, 7, []byte("ab"), []byte("c"))
	x.Add(&p, 1, 0, 0)
	if _, ok := find(&x, 7, []byte("a"), []byte("bc"), 0); ok {
		t.Fatal(`("a", "bc") found the record of ("ab", "c")`)
	}
	if rec, ok := find(&x, 7, []byte("ab"), []byte("c"), 0); !ok || rec.Ref != 1 {
		t.Fatalf(`("ab", "c"): %v, %v`, ok, rec)
	}
	long := make([]byte, KeyMax+1)
	p.Start(&x, 8, long, nil)
	x.Add(&p, 2, 0, 0)
	if x.Len() != 1 {
		t.Fatalf("an identity of %d bytes was added", len(long))
	}
}

// TestGate checks the gate's windows: a window with fewer than a quarter
// of hits turns it cold, and then one read in ColdSample uses the index,
// until a window of those with a quarter turns it warm.
func TestGate(t *testing.T) {
	var g Gate
	for i := range Window {
		if !g.Use() {
			t.Fatalf("read %d: a warm gate refused a read", i)
		}
		g.Count(i%5 == 0) // 20% hits
	}
	if !g.Cold() {
		t.Fatal("a window of 20% hits left the gate warm")
	}
	used := 0
	for used < Window {
		if !g.Use() {
			t.Fatal("a cold gate let none of ColdSample reads use the index")
		}
		g.Count(used%4 == 0) // 25% hits
		used++
		if used == Window {
			break // the gate is warm now
		}
		for range ColdSample - 1 {
			if g.Use() {
				t.Fatal("a cold gate let two reads in ColdSample use the index")
			}
		}
	}
	if g.Cold() {
		t.Fatal("a window of samples with 25% hits left the gate cold")
	}
}
