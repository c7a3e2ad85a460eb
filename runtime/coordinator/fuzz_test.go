package coordinator

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stategen/stategen/runtime"
)

// FuzzCoreNeverPanics feeds a Core arbitrary inputs — any ids, senders,
// payloads, store results and times, backwards included — and checks that
// it neither panics nor breaks its basic guarantees: ids strictly increase,
// at most MaxConcurrent checkpoints pending besides savepoints, at most
// Retained checkpoints retained, every triggered checkpoint ends once, and
// with IDReservation no id is issued beyond the durable limit.
func FuzzCoreNeverPanics(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte("\x01\x02\x00\x05\x05\x05\x06\x06\x07\x00\x00\x08\x09\x0a\x0b"))
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func() byte {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return b
		}
		cfg := Config{
			Interval:          time.Duration(1+next()%20) * time.Second,
			Timeout:           time.Duration(1+next()%60) * time.Second,
			MinPause:          time.Duration(next()%10) * time.Second,
			MaxConcurrent:     int(next() % 4),
			TolerableFailures: int(next() % 3),
			Retained:          int(next() % 3),
			IDReservation:     int(next() % 4),
		}
		c, err := New(cfg, t0, Recovery{NextID: CheckpointID(next())})
		if err != nil {
			t.Fatal(err)
		}
		cfg = c.Config()
		now := t0
		ended := map[CheckpointID]bool{}
		triggered := map[CheckpointID]bool{}
		var last CheckpointID
		peers := []ParticipantID{"a", "b", "c", ""}
		for len(data) > 0 {
			op, arg := next(), next()
			id := CheckpointID(arg % 16)
			if arg >= 250 {
				id = MaxID + CheckpointID(arg)
			}
			p := peers[int(next())%len(peers)]
			switch op % 13 {
			case 0:
				now = now.Add(time.Duration(arg) * time.Second / 4)
				c.Tick(now)
			case 1:
				now = now.Add(-time.Duration(arg) * time.Second) // backwards: clamped
				c.Tick(now)
			case 2:
				c.AddParticipant(p)
			case 3:
				c.RemoveParticipant(now, p)
			case 4, 5:
				files := []string{fmt.Sprintf("%s%d", p, id)}
				if arg%7 == 0 {
					files = append(files, "")
				}
				pl := Payload{Files: files, Bytes: int64(arg) - 3, Finished: arg%2 == 0}
				if arg%4 != 0 {
					// Key groups of "op": mostly a quarter of [0, 16) by
					// participant, sometimes out of range.
					start := int(arg%5) * 4
					pl.KeyGroups = KeyGroups{Operator: "op", MaxParallelism: 16, Range: runtime.KeyGroupRange{Start: start, End: start + 4}}
				}
				c.Ack(now, id, p, pl)
			case 6:
				c.Decline(now, id, p, errors.New("no"))
			case 7:
				c.TriggerFailed(now, id, nil)
			case 8:
				var err error
				if arg%3 == 0 {
					err = errors.New("disk full")
				}
				c.StoreResult(now, id, err)
			case 9:
				c.RequestSavepoint(now, string(p))
			case 10:
				c.Shutdown(now)
			case 11:
				var err error
				if arg%3 == 0 {
					err = errors.New("counter unavailable")
				}
				limit := c.reserving
				if arg%5 == 0 {
					limit = CheckpointID(arg)
				}
				c.ReserveResult(now, limit, err)
			case 12:
				c.RequestCheckpoint(now)
			}
			for _, d := range c.Ready() {
				switch d := d.(type) {
				case Trigger:
					if d.ID <= last {
						t.Fatalf("id %d after %d", d.ID, last)
					}
					last = d.ID
					triggered[d.ID] = true
					if cfg.IDReservation > 0 && d.ID >= c.IDLimit() {
						t.Fatalf("id %d issued beyond the durable limit %d", d.ID, c.IDLimit())
					}
				case Report:
					if !triggered[d.Record.ID] || ended[d.Record.ID] {
						t.Fatalf("report of %d: triggered %v, ended before %v", d.Record.ID, triggered[d.Record.ID], ended[d.Record.ID])
					}
					ended[d.Record.ID] = true
				}
			}
			n := 0
			for _, p := range c.pending {
				if !p.opts.Savepoint {
					n++
				}
			}
			if n > cfg.MaxConcurrent || len(c.Retained()) > cfg.Retained {
				t.Fatalf("%d pending (max %d), %d retained (max %d)", n, cfg.MaxConcurrent, len(c.Retained()), cfg.Retained)
			}
		}
	})
}
