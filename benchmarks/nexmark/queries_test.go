package nexmark

import (
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// testEvents is the length of the tests' streams on backend: 100,000
// events (100 s of event time: 10 tumbling windows, 20 sliding ones, q3's
// cleanup timers firing from 60 s on) on the in-memory backends, 20,000 on
// pebble, whose every operation costs several times theirs; 20,000 on
// every backend under -short; a half (a quarter on pebble) under -race.
func testEvents(backend string) int {
	n := 100_000
	if testing.Short() || backend == "pebble" {
		n = 20_000
	}
	if raceEnabled {
		n /= 2
		if backend == "pebble" {
			n /= 2
		}
	}
	return n
}

// minRows is the fewest rows query name must emit on n events for a test
// to count: every window emits at least one row (q5's windows slide by
// half their size), and the joins and sessions many.
func minRows(name string, n int) int {
	windows := n * InterEventDelayUs / 1000 / WindowSize
	switch name {
	case "q5":
		return 2 * windows
	case "q7":
		return windows
	}
	return n / 200
}

// TestQueriesMatchPlain runs every query, and the five in one pass, on
// every backend and requires the rows to equal the plain-Go queries' rows
// exactly (as multisets: sorted and compared row by row), every query to
// emit a non-trivial number of rows, and the store to be empty at the end
// (the watermark at the end of time fires every window and cleanup).
func TestQueriesMatchPlain(t *testing.T) {
	for _, be := range backends {
		for _, name := range append(slices.Clone(Queries), "all") {
			t.Run(be.name+"/"+name, func(t *testing.T) {
				n := testEvents(be.name)
				want := plainOutput(t, name, n)
				got, store, err := runOnStore(be, filepath.Join(t.TempDir(), "store"), name, stream(n), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer store.Close()
				diffs, err := Diff(name, want, got, 20)
				if err != nil {
					t.Fatal(err)
				}
				if len(diffs) > 0 {
					t.Fatalf("%d events: the rows differ from plain Go's:\n%s", n, joinLines(diffs))
				}
				names, _ := expand(name)
				for _, q := range names {
					if rows, least := got.Rows(q), minRows(q, n); rows < least {
						t.Errorf("%s emitted %d rows on %d events, want at least %d", q, rows, n, least)
					}
				}
				left, err := entries(store)
				if err != nil {
					t.Fatal(err)
				}
				if left != 0 {
					t.Errorf("the store holds %d entries after the end of the stream, want 0", left)
				}
				t.Logf("%d events, %d rows (%s)", n, got.Rows(name), rowCounts(got, name))
			})
		}
	}
}

// TestDiffDetectsWrongRows proves the comparison is not vacuous: a row
// dropped, a row duplicated and a field changed, in the stategen rows of
// each query, each come out as differences; and so does running the
// stategen queries on another stream than the plain ones'.
func TestDiffDetectsWrongRows(t *testing.T) {
	const n = 20_000
	events := stream(n)
	for _, name := range Queries {
		t.Run(name, func(t *testing.T) {
			want := plainOutput(t, name, n)
			got, store, err := runOnStore(backends[0], "", name, events, nil)
			if err != nil {
				t.Fatal(err)
			}
			store.Close()
			if d, _ := Diff(name, want, got, 0); len(d) != 0 {
				t.Fatalf("the right rows differ: %v", d)
			}
			mutations := map[string]func(o *Output){
				"drop": func(o *Output) {
					o.Q3, o.Q5, o.Q7, o.Q8, o.Q11 = dropLast(o.Q3), dropLast(o.Q5), dropLast(o.Q7), dropLast(o.Q8), dropLast(o.Q11)
				},
				"duplicate": func(o *Output) {
					o.Q3, o.Q5, o.Q7, o.Q8, o.Q11 = dupFirst(o.Q3), dupFirst(o.Q5), dupFirst(o.Q7), dupFirst(o.Q8), dupFirst(o.Q11)
				},
				"change": func(o *Output) {
					if len(o.Q3) > 0 {
						o.Q3[0].City += "x"
					}
					if len(o.Q5) > 0 {
						o.Q5[0].Count++
					}
					if len(o.Q7) > 0 {
						o.Q7[0].Price--
					}
					if len(o.Q8) > 0 {
						o.Q8[0].Reserve++
					}
					if len(o.Q11) > 0 {
						o.Q11[0].End++
					}
				},
			}
			for m, mutate := range mutations {
				wrong := clone(got)
				mutate(wrong)
				d, err := Diff(name, want, wrong, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(d) == 0 {
					t.Errorf("%s: a wrong result (%s a row) compares equal", name, m)
				}
			}
			other, store, err := runOnStore(backends[0], "", name, Generate(seed+1, n), nil)
			if err != nil {
				t.Fatal(err)
			}
			store.Close()
			if d, _ := Diff(name, want, other, 0); len(d) == 0 {
				t.Errorf("%s: the rows of another stream compare equal", name)
			}
		})
	}
	if _, err := Diff("q4", &Output{}, &Output{}, 0); !errors.Is(err, ErrUnknownQuery) {
		t.Errorf("Diff of an unknown query: %v, want ErrUnknownQuery", err)
	}
	if _, err := NewPlain("q6", &Output{}); !errors.Is(err, ErrUnknownQuery) {
		t.Errorf("NewPlain(q6): %v, want ErrUnknownQuery", err)
	}
}

// TestWindowRules pins the window arithmetic the two implementations
// share.
func TestWindowRules(t *testing.T) {
	if w := tumbling(BaseTime + 10_001); w != (Window{BaseTime + 10_000, BaseTime + 20_000}) {
		t.Errorf("tumbling = %v", w)
	}
	if w := tumbling(-1); w != (Window{-WindowSize, 0}) {
		t.Errorf("tumbling(-1) = %v", w)
	}
	var starts []int64
	for s := latestSliding(12_000); s > 12_000-WindowSize; s -= WindowPeriod {
		starts = append(starts, s)
	}
	if !slices.Equal(starts, []int64{10_000, 5_000}) {
		t.Errorf("sliding windows of 12000 start at %v", starts)
	}
	if !(Window{0, 10}).intersects(Window{10, 20}) || (Window{0, 10}).intersects(Window{11, 20}) {
		t.Error("sessions that touch must merge, and only those")
	}
}

func dropLast[R any](rs []R) []R {
	if len(rs) == 0 {
		return rs
	}
	return rs[:len(rs)-1]
}

func dupFirst[R any](rs []R) []R {
	if len(rs) == 0 {
		return rs
	}
	return append(rs, rs[0])
}

func clone(o *Output) *Output {
	return &Output{Q3: slices.Clone(o.Q3), Q5: slices.Clone(o.Q5), Q7: slices.Clone(o.Q7), Q8: slices.Clone(o.Q8), Q11: slices.Clone(o.Q11)}
}

func joinLines(ss []string) string {
	var b strings.Builder
	for _, s := range ss {
		b.WriteString("\t" + s + "\n")
	}
	return b.String()
}

// rowCounts lists the rows of each query of name.
func rowCounts(o *Output, name string) string {
	names, _ := expand(name)
	parts := make([]string, len(names))
	for i, q := range names {
		parts[i] = q + ": " + strconv.Itoa(o.Rows(q))
	}
	return strings.Join(parts, ", ")
}
