// Package tick runs the progress reports of long work: a function called
// about once a period on a goroutine of its own, and once more when the
// work ends, so that the last report is the whole work. checkpoint's
// restore and checkpoint/inspect's Verify and Dump use it.
package tick

import (
	"sync"
	"time"
)

// Every calls report every period, from a goroutine of its own, until the
// function it returns is called; that function waits for the goroutine,
// then calls report once more, and must be called exactly once.
func Every(period time.Duration, report func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				report()
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		report()
	}
}
