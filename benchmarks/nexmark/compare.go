package nexmark

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Diff compares the rows of query name ("all": of every query) in got with
// those in want, as multisets — the order in which rows were emitted does
// not count, their number does — and returns the differences, at most limit
// of them (limit <= 0: all), each naming the query and the row missing from
// got or extra in it. It sorts copies: want and got are left as they are.
func Diff(name string, want, got *Output, limit int) ([]string, error) {
	names, err := expand(name)
	if err != nil {
		return nil, err
	}
	var d []string
	for _, n := range names {
		switch n {
		case "q3":
			d = diffRows(d, n, want.Q3, got.Q3, compareQ3)
		case "q5":
			d = diffRows(d, n, want.Q5, got.Q5, compareQ5)
		case "q7":
			d = diffRows(d, n, want.Q7, got.Q7, compareQ7)
		case "q8":
			d = diffRows(d, n, want.Q8, got.Q8, compareQ8)
		case "q11":
			d = diffRows(d, n, want.Q11, got.Q11, compareQ11)
		}
	}
	if limit > 0 && len(d) > limit {
		d = append(d[:limit], fmt.Sprintf("... and %d more", len(d)-limit))
	}
	return d, nil
}

// diffRows appends to d the rows of want missing from got and the rows of
// got not in want, in the order of compare.
func diffRows[R any](d []string, name string, want, got []R, compare func(a, b R) int) []string {
	w, g := slices.Clone(want), slices.Clone(got)
	slices.SortFunc(w, compare)
	slices.SortFunc(g, compare)
	if len(w) != len(g) {
		d = append(d, fmt.Sprintf("%s: %d rows, want %d", name, len(g), len(w)))
	}
	i, j := 0, 0
	for i < len(w) || j < len(g) {
		c := 0
		switch {
		case i == len(w):
			c = 1
		case j == len(g):
			c = -1
		default:
			c = compare(w[i], g[j])
		}
		switch {
		case c < 0:
			d = append(d, fmt.Sprintf("%s: missing %+v", name, w[i]))
			i++
		case c > 0:
			d = append(d, fmt.Sprintf("%s: extra %+v", name, g[j]))
			j++
		default:
			i, j = i+1, j+1
		}
	}
	return d
}

func compareQ3(a, b Q3Row) int {
	return cmp.Or(cmp.Compare(a.Auction, b.Auction), strings.Compare(a.Name, b.Name),
		strings.Compare(a.City, b.City), strings.Compare(a.State, b.State))
}

func compareQ5(a, b Q5Row) int {
	return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.End, b.End),
		cmp.Compare(a.Auction, b.Auction), cmp.Compare(a.Count, b.Count))
}

func compareQ7(a, b Q7Row) int {
	return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.End, b.End),
		cmp.Compare(a.Auction, b.Auction), cmp.Compare(a.Bidder, b.Bidder),
		cmp.Compare(a.Price, b.Price), cmp.Compare(a.Time, b.Time))
}

func compareQ8(a, b Q8Row) int {
	return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Person, b.Person),
		strings.Compare(a.Name, b.Name), cmp.Compare(a.Reserve, b.Reserve))
}

func compareQ11(a, b Q11Row) int {
	return cmp.Or(cmp.Compare(a.Bidder, b.Bidder), cmp.Compare(a.Start, b.Start),
		cmp.Compare(a.End, b.End), cmp.Compare(a.Count, b.Count))
}
