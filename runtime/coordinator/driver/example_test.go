package driver_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/coordinator/driver"
	"github.com/stategen/stategen/runtime/storetest"
)

// words is the input: a log whose offsets the source reads from.
var words = []string{"apple", "pear", "apple", "fig", "pear", "apple", "fig", "apple"}

// record is one input record and its offset in the log.
type record struct {
	offset int
	word   string
}

// source replays the log from offset, like a Kafka consumer.
func source(from int) <-chan record {
	ch := make(chan record)
	go func() {
		defer close(ch)
		for i := from; i < len(words); i++ {
			ch <- record{i, words[i]}
		}
	}()
	return ch
}

var counts = runtime.ValueDescriptor[string, int64]{
	Name: "counts", Fingerprint: "v1", Key: runtime.StringCodec{}, Value: runtime.Int64Codec{},
}

// The common case: an operator goroutine selects on its input, on its
// instance's triggers (the mailbox) and on its notifications. A trigger is
// handled between two records — the synchronous phase and the source offset
// describe the same point of the input — and a completion tells the source
// which offset it may commit. After a crash, the job restores the latest
// checkpoint and replays the input from the offset it recorded: every word
// is counted exactly once, whenever the checkpoint happened.
func ExampleCoordinator_Join() {
	ctx := context.Background()
	storage := checkpoint.NewMem()

	// The first run: count words until a checkpoint completes, then crash.
	coord, err := driver.Start(ctx, driver.Options{
		Config:  coordinator.Config{Interval: 10 * time.Millisecond},
		Storage: storage,
		Logger:  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	store, _ := storetest.NewModel(runtime.StoreConfig{}) // any backend: cow, btree, pebble
	wordCounts, _ := runtime.NewValue(store, counts)
	inst, err := coord.Join(driver.InstanceOptions{Operator: "wordcount", Index: 0, Store: store})
	if err != nil {
		log.Fatal(err)
	}
	input, next := source(0), 0
	for done := false; !done; {
		select {
		case r, ok := <-input:
			if !ok {
				input = nil // the input ended; wait for a checkpoint
				continue
			}
			_ = wordCounts.Update(r.word, func(n int64, _ bool) int64 { return n + 1 })
			next = r.offset + 1
		case t := <-inst.Triggers():
			if err := inst.Snapshot(t, binary.AppendUvarint(nil, uint64(next))); err != nil {
				log.Print(err) // declined; the next checkpoint will do
			}
		case n := <-inst.Notifications():
			if n.Completed() && !n.Savepoint {
				// Commit the source's offset (binary.Uvarint(n.OperatorState))
				// to Kafka here.
				done = true
			}
		}
	}
	_ = inst.Close()
	_ = coord.Close(ctx)

	// The restart: restore the latest checkpoint into a new store and
	// resume the input at the offset recorded with it.
	store, _ = storetest.NewModel(runtime.StoreConfig{})
	wordCounts, _ = runtime.NewValue(store, counts)
	restored, err := driver.RestoreLatest(ctx, storage, "wordcount", 0, 1, store, nil)
	if err != nil {
		log.Fatal(err)
	}
	from, _ := binary.Uvarint(restored.OperatorStates[0])
	for r := range source(int(from)) {
		_ = wordCounts.Update(r.word, func(n int64, _ bool) int64 { return n + 1 })
	}
	fmt.Println("restored checkpoint", restored.ID)
	for _, w := range []string{"apple", "fig", "pear"} {
		n, _, _ := wordCounts.Get(w)
		fmt.Println(w, n)
	}
	// Output:
	// restored checkpoint 1
	// apple 4
	// fig 2
	// pear 2
}
