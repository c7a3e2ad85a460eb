package etcdcoord_test

import (
	"context"
	"errors"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/coordinator/driver"
	"github.com/stategen/stategen/runtime/coordinator/etcdcoord"
)

// A coordinator process: it leads the job's checkpoints while it wins the
// election, and stands by otherwise. Run two or more for failover.
func Example_coordinator() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	storage, err := checkpoint.NewDir("/shared/checkpoints")
	if err != nil {
		log.Fatal(err)
	}
	c, err := etcdcoord.StartCoordinator(ctx, cli, etcdcoord.Options{
		Job:      etcdcoord.Job{Name: "clickstream"},
		Storage:  storage,
		Config:   coordinator.Config{Interval: 10 * time.Second, Retained: 3},
		LeaseTTL: 10 * time.Second,
		// The job graph: operator "clicks" at parallelism 3. No
		// checkpoint completes without all three instances.
		Expected: map[string]int{"clicks": 3},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	<-c.Failed() // or a signal: checkpoints go on meanwhile
	log.Print(c.Err())
}

// A worker process: instance 1 of 3 of operator "clicks" restores its
// share of the latest checkpoint and takes part in the checkpoints of
// whichever coordinator leads.
func Example_worker() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	storage, err := checkpoint.NewDir("/shared/checkpoints")
	if err != nil {
		log.Fatal(err)
	}
	job := etcdcoord.Job{Name: "clickstream"}
	const index, parallelism, maxParallelism = 1, 3, 128
	kgs, err := runtime.KeyGroupRangeForOperator(maxParallelism, parallelism, index)
	if err != nil {
		log.Fatal(err)
	}
	store, err := cow.New(cow.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: maxParallelism, KeyGroups: kgs}})
	if err != nil {
		log.Fatal(err)
	}
	// ... register the operator's states on store ...
	restored, err := etcdcoord.RestoreLatest(ctx, cli, job, storage, "clicks", index, parallelism, store, nil)
	switch {
	case errors.Is(err, driver.ErrNoCheckpoint):
		// A fresh start.
	case err != nil:
		log.Fatal(err)
	default:
		_ = restored.OperatorStates // the source positions to resume from
	}
	inst, err := etcdcoord.Join(ctx, cli, etcdcoord.JoinOptions{
		Job:      job,
		Instance: driver.InstanceOptions{Operator: "clicks", Index: index, Store: store},
		Storage:  storage,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer inst.Close()
	var offset []byte // the source position, say
	for {
		select {
		case t := <-inst.Triggers():
			// Between two records: the synchronous phase, then the write
			// goes on in the background.
			if err := inst.Snapshot(t, offset); err != nil {
				log.Print(err)
			}
		case n := <-inst.Notifications():
			if n.Completed() && !n.Savepoint {
				_ = n.OperatorState // commit the source positions up to it
			}
			// case r := <-input: process r with store ...
		}
	}
}
