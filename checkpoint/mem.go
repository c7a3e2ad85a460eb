package checkpoint

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
)

// Mem is an in-memory Storage, for tests and benchmarks that should not
// touch a disk. It follows the Storage contract exactly, including
// invisible uncommitted writes, so code tested on Mem behaves the same on
// Dir.
type Mem struct {
	mu      sync.Mutex
	objects map[string]map[string][]byte
	pending map[string]map[*memWriter]struct{}
}

var _ Storage = (*Mem)(nil)

// NewMem returns an empty in-memory Storage.
func NewMem() *Mem {
	return &Mem{
		objects: make(map[string]map[string][]byte),
		pending: make(map[string]map[*memWriter]struct{}),
	}
}

// Create implements Storage.
func (m *Mem) Create(ctx context.Context, ckpt, name string) (ObjectWriter, error) {
	if err := checkNames(ckpt, name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objects[ckpt][name]; ok {
		return nil, fmt.Errorf("%w: %s/%s", ErrExist, ckpt, name)
	}
	w := &memWriter{m: m, ctx: ctx, ckpt: ckpt, name: name}
	if m.pending[ckpt] == nil {
		m.pending[ckpt] = make(map[*memWriter]struct{})
	}
	m.pending[ckpt][w] = struct{}{}
	return w, nil
}

type memWriter struct {
	m          *Mem
	ctx        context.Context
	ckpt, name string
	buf        bytes.Buffer
	done       bool // guarded by m.mu
	discarded  bool // guarded by m.mu: RemoveIncomplete or Delete dropped it
}

func (w *memWriter) Write(p []byte) (int, error) {
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	return w.buf.Write(p)
}

// unpend removes w from the pending writers; m.mu is held.
func (w *memWriter) unpend() {
	delete(w.m.pending[w.ckpt], w)
	if len(w.m.pending[w.ckpt]) == 0 {
		delete(w.m.pending, w.ckpt)
	}
}

func (w *memWriter) Commit() error {
	m := w.m
	m.mu.Lock()
	defer m.mu.Unlock()
	path := w.ckpt + "/" + w.name
	if w.done {
		return fmt.Errorf("checkpoint: %s: writer already committed or aborted", path)
	}
	w.done = true
	w.unpend()
	if w.discarded {
		return fmt.Errorf("checkpoint: %s: uncommitted write was discarded", path)
	}
	if err := w.ctx.Err(); err != nil {
		return err
	}
	if _, ok := m.objects[w.ckpt][w.name]; ok {
		return fmt.Errorf("%w: %s", ErrExist, path)
	}
	if m.objects[w.ckpt] == nil {
		m.objects[w.ckpt] = make(map[string][]byte)
	}
	m.objects[w.ckpt][w.name] = bytes.Clone(w.buf.Bytes())
	w.buf = bytes.Buffer{}
	return nil
}

func (w *memWriter) Abort() error {
	m := w.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if !w.done {
		w.done = true
		w.unpend()
	}
	return nil
}

// Open implements Storage.
func (m *Mem) Open(ctx context.Context, ckpt, name string) (Object, error) {
	if err := checkNames(ckpt, name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objects[ckpt][name]
	if !ok {
		return nil, notFound(ckpt, name, nil)
	}
	return memObject{bytes.NewReader(b)}, nil
}

type memObject struct{ *bytes.Reader }

func (memObject) Close() error { return nil }

// Stat implements Storage.
func (m *Mem) Stat(ctx context.Context, ckpt, name string) (ObjectInfo, error) {
	if err := checkNames(ckpt, name); err != nil {
		return ObjectInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return ObjectInfo{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objects[ckpt][name]
	if !ok {
		return ObjectInfo{}, notFound(ckpt, name, nil)
	}
	return ObjectInfo{Name: name, Size: int64(len(b))}, nil
}

// List implements Storage.
func (m *Mem) List(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for c := range m.objects {
		out = append(out, c)
	}
	for c := range m.pending {
		if _, ok := m.objects[c]; !ok {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Objects implements Storage.
func (m *Mem) Objects(ctx context.Context, ckpt string) ([]ObjectInfo, error) {
	if err := ValidateName(ckpt); err != nil {
		return nil, fmt.Errorf("checkpoint name: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []ObjectInfo
	for name, b := range m.objects[ckpt] {
		out = append(out, ObjectInfo{Name: name, Size: int64(len(b))})
	}
	slices.SortFunc(out, func(a, b ObjectInfo) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out, nil
}

// Remove implements Storage.
func (m *Mem) Remove(ctx context.Context, ckpt, name string) error {
	if err := checkNames(ckpt, name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects[ckpt], name)
	if len(m.objects[ckpt]) == 0 {
		delete(m.objects, ckpt)
	}
	return nil
}

// RemoveIncomplete implements Storage.
func (m *Mem) RemoveIncomplete(ctx context.Context, ckpt string) error {
	if err := ValidateName(ckpt); err != nil {
		return fmt.Errorf("checkpoint name: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.discardPending(ckpt)
	return nil
}

// discardPending drops the uncommitted writes of ckpt; m.mu is held.
func (m *Mem) discardPending(ckpt string) {
	for w := range m.pending[ckpt] {
		w.discarded = true
	}
	delete(m.pending, ckpt)
}

// Delete implements Storage.
func (m *Mem) Delete(ctx context.Context, ckpt string) error {
	if err := ValidateName(ckpt); err != nil {
		return fmt.Errorf("checkpoint name: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, ckpt)
	m.discardPending(ckpt)
	return nil
}
