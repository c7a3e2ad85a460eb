package cow

import (
	"errors"
	"fmt"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storekit"
)

// This file makes the Store a runtime.TableHost: it keeps the tables of Go
// values that the typed layer makes (runtime.TypedValues) beside its own
// states, and gives them what it gives its own — a place in every
// snapshot, the key groups of every restore, the end of Close. A hosted
// state is a state whose tab is set; its byte tables (tabs) stay empty.

var _ runtime.TableHost = (*Store)(nil)

// HostTable implements runtime.TableHost.
func (s *Store) HostTable(spec runtime.StateSpec, mk func(runtime.StateSpec, runtime.TableEnv) (runtime.Table, error)) (runtime.State, error) {
	existing, err := storekit.CheckRegister(s.target(), s.closed, s.iterating > 0, spec)
	if err != nil {
		return nil, err
	}
	if !existing {
		t, err := mk(spec, s.tableEnv())
		if err != nil {
			return nil, err
		}
		s.create(spec)
		st := s.states[spec.Name]
		st.tab, st.handed = t, true
		s.handles[spec.Name] = t
		return t, nil
	}
	st := s.states[spec.Name]
	if st.tab != nil || st.handed {
		st.handed = true
		return s.handles[spec.Name], nil
	}
	// A state a Restore made, which no handle holds yet: its entries move
	// into a table.
	t, err := mk(st.spec, s.tableEnv())
	if err != nil {
		return nil, err
	}
	if err := s.adopt(st, t); err != nil {
		return nil, err
	}
	return t, nil
}

// tableEnv is what the store lends the tables it hosts.
func (s *Store) tableEnv() runtime.TableEnv {
	return runtime.TableEnv{
		Config:     s.cfg,
		Closed:     &s.closed,
		Iterating:  &s.iterating,
		CheckKey:   storekit.CheckKey,
		CheckGroup: storekit.CheckGroup,
		CheckKeys:  storekit.CheckKeys,
		Edit:       storekit.Edit,
	}
}

// adopt moves the entries of st's byte tables into t and makes t the
// state, read through a snapshot of the store (released before it
// returns). If t cannot load them, st is left as it was.
func (s *Store) adopt(st *state, t runtime.Table) (err error) {
	snap, err := s.Snapshot()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, snap.Release()) }()
	name := st.spec.Name
	install, err := t.Load(s.cfg.KeyGroups, func(kg int, fn func(runtime.Entry) error) error {
		return snap.Scan(name, kg, fn)
	})
	if err != nil {
		return fmt.Errorf("cow: state %q: %w", name, err)
	}
	install()
	clear(st.tabs)
	st.tab, st.handed = t, true
	s.handles[name] = t
	return nil
}

// loadHosted loads the hosted states of specs from src, in the key groups
// of groups, and returns the function that installs them all: a hosted
// table decodes its entries itself, and never goes through the loader.
func (s *Store) loadHosted(src runtime.View, specs []runtime.StateSpec, groups runtime.KeyGroupRange) (func(), error) {
	var installs []func()
	for _, spec := range specs {
		st, ok := s.states[spec.Name]
		if !ok || st.tab == nil {
			continue
		}
		install, err := st.tab.Load(groups, func(kg int, fn func(runtime.Entry) error) error {
			return src.Scan(spec.Name, kg, func(e runtime.Entry) error {
				g := runtime.KeyGroupOfHash(runtime.HashKey(e.Key), s.cfg.MaxParallelism)
				if err := storekit.CheckEntry(st.spec, kg, g, e); err != nil {
					return fmt.Errorf("state %q, key group %d: %w", spec.Name, kg, err)
				}
				return fn(e)
			})
		})
		if err != nil {
			return nil, fmt.Errorf("cow: restore: %w", err)
		}
		installs = append(installs, install)
	}
	return func() {
		for _, install := range installs {
			install()
		}
	}, nil
}

// hosted reports whether the state named name is a hosted table.
func (s *Store) hosted(name string) bool {
	st, ok := s.states[name]
	return ok && st.tab != nil
}
