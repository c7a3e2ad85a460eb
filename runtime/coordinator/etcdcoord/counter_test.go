package etcdcoord

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/stategen/stategen/runtime/coordinator"
)

// Coordinators racing for checkpoint ids: three counters on one key,
// each reserving small batches as fast as it can, with a Read before each
// try. Every reservation that succeeds claims the ids from the mark it
// read to its new mark; the claims of all of them tile the ids without a
// gap or an overlap, so no two coordinators ever hold the same id.
func TestCounterRacingReservationsNeverOverlap(t *testing.T) {
	job := testJob(t)
	ctx := context.Background()
	type claim struct {
		from, to coordinator.CheckpointID
		owner    string
	}
	var mu sync.Mutex
	var claims []claim
	conflicts := 0
	var wg sync.WaitGroup
	for i := range 3 {
		owner := fmt.Sprintf("coordinator-%d", i)
		c, err := NewCounter(client(t), job, owner)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(uint64(i), 1))
		wg.Go(func() {
			for range 25 {
				from, err := c.Read(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				to := from + 1 + coordinator.CheckpointID(rng.IntN(4))
				err = c.Reserve(ctx, to)
				mu.Lock()
				switch {
				case errors.Is(err, ErrCounterConflict):
					conflicts++
				case err != nil:
					t.Error(err)
				default:
					claims = append(claims, claim{from, to, owner})
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(claims, func(a, b claim) int { return int(a.from) - int(b.from) })
	var next coordinator.CheckpointID
	for _, c := range claims {
		if c.from != next {
			t.Fatalf("claim [%d, %d) of %s does not start where the previous ended (%d): claims %v", c.from, c.to, c.owner, next, claims)
		}
		next = c.to
	}
	c, err := NewCounter(client(t), job, "observer")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Read(ctx); err != nil || got != next {
		t.Fatalf("counter %d, %v; the claims end at %d", got, err, next)
	}
	t.Logf("%d reservations succeeded, %d lost a race", len(claims), conflicts)
}

// A reservation swaps from the value its counter last saw: a counter that
// did not see another's reservation fails, reserves nothing, and succeeds
// after reading again; a repeated reservation of the limit a counter holds
// succeeds without moving the counter.
func TestCounterReserveComparesAndSwaps(t *testing.T) {
	job := testJob(t)
	ctx := context.Background()
	a, _ := NewCounter(client(t), job, "a")
	b, _ := NewCounter(client(t), job, "b")
	if err := a.Reserve(ctx, 10); err == nil {
		t.Fatal("Reserve before Read succeeded")
	}
	for _, c := range []*Counter{a, b} {
		if got, err := c.Read(ctx); got != 0 || err != nil {
			t.Fatalf("new counter reads %d, %v", got, err)
		}
	}
	if err := a.Reserve(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if err := a.Reserve(ctx, 10); err != nil {
		t.Errorf("repeated reservation: %v", err)
	}
	if err := b.Reserve(ctx, 10); !errors.Is(err, ErrCounterConflict) {
		t.Fatalf("b reserved ids a holds: %v", err)
	}
	if err := b.Reserve(ctx, 5); err == nil {
		t.Fatal("b reserved below the counter")
	}
	if got, _ := b.Read(ctx); got != 10 {
		t.Fatalf("b reads %d, want 10", got)
	}
	if err := b.Reserve(ctx, 20); err != nil {
		t.Fatal(err)
	}
	if err := a.Reserve(ctx, 30); !errors.Is(err, ErrCounterConflict) {
		t.Fatalf("a reserved over b's reservation: %v", err)
	}
	// Ids below 10 are a's: repeating that reservation still succeeds,
	// and does not move the counter back.
	if err := a.Reserve(ctx, 10); err != nil {
		t.Errorf("repeated reservation after b's: %v", err)
	}
	if got, _ := a.Read(ctx); got != 20 {
		t.Errorf("counter %d, want 20", got)
	}
	if _, err := NewCounter(client(t), job, ""); err == nil {
		t.Error("NewCounter without an owner succeeded")
	}
}
