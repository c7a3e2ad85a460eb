package pipeline

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/stategen/stategen/runtime"
)

// Contents is the canonical form of the states of a job, whatever its
// parallelism and backend: one string per (state, key, namespace, user
// key), holding the value — or, for a list, the length-prefixed elements
// in order. Two jobs hold the same state exactly when their Contents are
// equal.
type Contents map[string]string

// Dump reads the states of stores — the instances of one job, owning
// disjoint key groups — into their Contents, through snapshots.
func Dump(stores []runtime.Store) (Contents, error) {
	out := make(Contents)
	for _, s := range stores {
		snap, err := s.Snapshot()
		if err != nil {
			return nil, err
		}
		err = dumpView(snap, out)
		if rerr := snap.Release(); err == nil {
			err = rerr
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// dumpView adds the entries of v to out.
func dumpView(v runtime.View, out Contents) error {
	for _, spec := range v.States() {
		for kg := range v.KeyGroups().All() {
			var prev string // the list being accumulated
			err := v.Scan(spec.Name, kg, func(e runtime.Entry) error {
				k := entryKey(spec.Name, e)
				if spec.Kind == runtime.KindList {
					if _, ok := out[k]; ok && k != prev {
						return fmt.Errorf("state %q: list %s in two places", spec.Name, k)
					}
					prev = k
					out[k] += string(runtime.AppendBytesValue(nil, e.Value))
					return nil
				}
				if _, ok := out[k]; ok {
					return fmt.Errorf("state %q: duplicate entry %s", spec.Name, describe(k))
				}
				out[k] = string(e.Value)
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// entryKey is the canonical key of an entry: its state name, key,
// namespace and user key, each length-prefixed.
func entryKey(state string, e runtime.Entry) string {
	b := runtime.AppendStringValue(nil, state)
	b = runtime.AppendBytesValue(b, e.Key)
	b = runtime.AppendBytesValue(b, e.Namespace)
	b = runtime.AppendBytesValue(b, e.UserKey)
	return string(b)
}

// describe formats a canonical entry key for people: the state, the user
// (every state of the example is keyed by user), and the namespace and
// user key in hex.
func describe(k string) string {
	state, rest, err1 := runtime.DecodeStringValue([]byte(k))
	key, rest, err2 := runtime.DecodeBytesValue(rest)
	ns, rest, err3 := runtime.DecodeBytesValue(rest)
	uk, _, err4 := runtime.DecodeBytesValue(rest)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return hex.EncodeToString([]byte(k))
	}
	s := fmt.Sprintf("state %q", state)
	if user, rest, err := runtime.DecodeStringKey(key); err == nil && len(rest) == 0 {
		s += fmt.Sprintf(" user %q", user)
	} else {
		s += " key " + hex.EncodeToString(key)
	}
	if len(ns) > 0 {
		s += " namespace " + hex.EncodeToString(ns)
	}
	if len(uk) > 0 {
		s += " user key " + hex.EncodeToString(uk)
	}
	return s
}

// Compare returns the number of entries in which got and want differ, and
// a description of the first limit of them, in key order.
func Compare(got, want Contents, limit int) (n int, first []string) {
	keys := slices.Sorted(maps.Keys(want))
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int { return bytes.Compare([]byte(a), []byte(b)) })
	for _, k := range keys {
		g, gok := got[k]
		w, wok := want[k]
		var msg string
		switch {
		case !gok:
			msg = describe(k) + ": missing"
		case !wok:
			msg = describe(k) + ": unexpected (not in the reference)"
		case g != w:
			msg = fmt.Sprintf("%s: value %s, want %s", describe(k), hex.EncodeToString([]byte(g)), hex.EncodeToString([]byte(w)))
		default:
			continue
		}
		n++
		if len(first) < limit {
			first = append(first, msg)
		}
	}
	return n, first
}
