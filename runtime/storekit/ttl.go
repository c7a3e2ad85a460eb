package storekit

import (
	"fmt"

	"github.com/stategen/stategen/runtime"
)

// DropExpired returns snap as a snapshot that leaves out the entries of its
// states with a TTL that are expired at the store's current time (cfg's
// Clock): what every backend's Snapshot returns, so that no checkpoint
// holds an expired entry (Flink's cleanup in full snapshots). The time is
// read once, here, in the synchronous phase; the filter then costs one
// stamp comparison per entry of a state with a TTL in each Scan, and
// nothing for the other states. A snapshot without such states is returned
// as it is. A stored value too short for its stamp fails the Scan with
// runtime.ErrCorrupt, naming the state, key group and key.
func DropExpired(snap runtime.Snapshot, cfg *runtime.StoreConfig) runtime.Snapshot {
	var ttls map[string]int64
	for _, spec := range snap.States() {
		if spec.TTL != 0 {
			if ttls == nil {
				ttls = map[string]int64{}
			}
			ttls[spec.Name] = spec.TTL.Milliseconds()
		}
	}
	if ttls == nil {
		return snap
	}
	return &expiring{Snapshot: snap, ttls: ttls, now: cfg.Now().UnixMilli()}
}

// expiring is a snapshot seen through DropExpired.
type expiring struct {
	runtime.Snapshot
	ttls map[string]int64
	now  int64
}

// Scan scans the underlying snapshot, skipping expired entries of states
// with a TTL.
func (e *expiring) Scan(state string, kg int, fn func(runtime.Entry) error) error {
	ttl, ok := e.ttls[state]
	if !ok {
		return e.Snapshot.Scan(state, kg, fn)
	}
	return e.Snapshot.Scan(state, kg, func(en runtime.Entry) error {
		stamp, _, err := runtime.SplitTTLStamp(en.Value)
		if err != nil {
			return fmt.Errorf("state %q, key group %d, key %x: %w", state, kg, en.Key, err)
		}
		if runtime.TTLExpired(stamp, ttl, e.now) {
			return nil
		}
		return fn(en)
	})
}
