package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/stategen/stategen/runtime"
)

// The pipelined writer. n encoder goroutines take key groups in order from
// a queue and encode each into blocks; the calling goroutine takes the
// key groups in the same order and writes each one's blocks as they come,
// then its index entries. Key group g travels in a groupJob: a bounded
// channel of blocks, ended by a nil block, after which the job's sections
// and entry count are set. At most n+1 jobs are in flight (handed out and
// not yet written), so while the writer drains one, every encoder has one
// to work on; an encoder that runs pipelineGroupBlocks blocks ahead of the
// writer waits for it. Memory is therefore bounded by
// (n+1) × pipelineGroupBlocks + n + 1 blocks, whatever the state's size.
//
// Stopping. The first failure — an encoder's error or panic, the writer's
// error, the caller's context — cancels the pipeline's context with that
// error as its cause; every blocked send and receive selects on it. The
// writer then stops handing out jobs, closes the queue and waits for every
// encoder to return before WriteFile does.

// pipelineGroupBlocks is how many finished blocks of one key group may
// wait for the writer.
const pipelineGroupBlocks = 4

// groupJob is one key group on its way through the pipeline.
type groupJob struct {
	kg     int
	blocks chan []byte // finished blocks, then nil
	// Set by the encoder before it sends the final nil.
	secs    []sectionInfo
	entries int64
}

// errPipelineStopped is the cause of a pipeline stopped by a panic on the
// writer's goroutine; nobody sees it but the encoders.
var errPipelineStopped = errors.New("checkpoint: writer stopped")

func (fw *fileWriter) writePipelined(ctx context.Context, v runtime.View, kgs runtime.KeyGroupRange, specs []runtime.StateSpec, n int) (err error) {
	n = min(n, kgs.Len())
	ctx, cancel := context.WithCancelCause(ctx)
	ahead := n + 1
	jobs := make([]*groupJob, ahead)
	for i := range jobs {
		jobs[i] = &groupJob{blocks: make(chan []byte, pipelineGroupBlocks)}
	}
	queue := make(chan *groupJob, ahead)
	// free holds written blocks for reuse; an encoder that finds none
	// allocates one, and a block that finds free full is dropped.
	free := make(chan []byte, ahead*pipelineGroupBlocks+n+1)

	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { fw.encodeJobs(ctx, cancel, v, specs, queue, free) })
	}
	defer func() {
		// On every way out, a panic included: stop the encoders and wait
		// for them.
		cancel(errPipelineStopped)
		close(queue)
		wg.Wait()
	}()

	next := kgs.Start // the next key group to hand out
	for kg := range kgs.All() {
		for ; next < kgs.End && next-kg < ahead; next++ {
			j := jobs[(next-kgs.Start)%ahead]
			j.kg = next
			queue <- j // never blocks: at most ahead jobs are out
		}
		j := jobs[(kg-kgs.Start)%ahead]
		for {
			var b []byte
			select {
			case b = <-j.blocks:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			if b == nil {
				break
			}
			if err := fw.writeBlock(b); err != nil {
				cancel(err)
				return err
			}
			select {
			case free <- b:
			default:
			}
		}
		fw.index = appendGroupIndex(fw.index, j.secs)
		fw.entries += j.entries
	}
	return nil
}

// encodeJobs is an encoder goroutine: it encodes the jobs of queue until
// the queue is closed, skipping them once ctx is done. A failure cancels
// ctx with the failure as its cause.
func (fw *fileWriter) encodeJobs(ctx context.Context, cancel context.CancelCauseFunc, v runtime.View, specs []runtime.StateSpec,
	queue <-chan *groupJob, free chan []byte) {
	var j *groupJob
	enc := newEncoder(ctx, fw.blockSize, fw.maxP, func(b []byte) ([]byte, error) {
		select {
		case j.blocks <- b:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		select {
		case nb := <-free:
			return nb, nil
		default:
			return newBlockBuffer(fw.blockSize), nil
		}
	})
	defer func() {
		if r := recover(); r != nil {
			kg := -1
			if j != nil {
				kg = j.kg
			}
			cancel(fmt.Errorf("%w: scanning key group %d: %v\n%s", ErrPanic, kg, r, debug.Stack()))
		}
	}()
	for j = range queue {
		if ctx.Err() != nil {
			continue
		}
		before := enc.entries
		secs, err := enc.encodeGroup(v, specs, j.kg, j.secs[:0])
		if err != nil {
			cancel(err)
			continue
		}
		j.secs, j.entries = secs, enc.entries-before
		select {
		case j.blocks <- nil:
		case <-ctx.Done():
		}
	}
}
