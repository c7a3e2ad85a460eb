package benchmarks

// The workload every benchmark shares: how many entries a state holds, how
// large a value is, which keys are accessed in which order, and the value
// type with its codec. The knobs are environment variables (see doc.go).

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stategen/stategen/runtime"
)

// Val is the benchmarks' value: three integers, as a small user struct
// would hold, and a padding that makes its encoding valueSize bytes long.
type Val struct {
	A, B, C int64
	Pad     []byte
}

// valCodec encodes a Val as A, B and C in 24 little-endian bytes followed
// by the padding. The padding runs to the end of the encoding, so a Val is
// not self-delimiting: it is only ever the whole of a stored value or list
// element, which the handles decode one at a time.
type valCodec struct{}

func (valCodec) AppendValue(dst []byte, v Val) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(v.A))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(v.B))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(v.C))
	return append(dst, v.Pad...)
}

func (valCodec) DecodeValue(src []byte) (Val, []byte, error) {
	if len(src) < 24 {
		return Val{}, src, fmt.Errorf("%w: Val needs at least 24 bytes, have %d", runtime.ErrCorrupt, len(src))
	}
	v := Val{
		A: int64(binary.LittleEndian.Uint64(src)),
		B: int64(binary.LittleEndian.Uint64(src[8:])),
		C: int64(binary.LittleEndian.Uint64(src[16:])),
	}
	if len(src) > 24 {
		v.Pad = append([]byte(nil), src[24:]...) // a decoded value owns its memory
	}
	return v, nil, nil
}

var int64Codec runtime.Int64Codec

const (
	defaultKeys      = 1 << 20 // "1M"
	smokeKeys        = 10_000
	defaultValueSize = 24
	minValueSize     = 24
	maxValueSize     = 1 << 20

	listLen      = 100 // elements per list, and per ListUpdate and ListAddAll (Flink's)
	mapFanout    = 10  // entries per map (Flink's)
	sortedFanout = 64  // entries per sorted map
	rangeLen     = 16  // entries per SortedMapRange
)

// workload is the configuration of a run, from the environment.
type workload struct {
	keys      int    // entries of every state
	valueSize int    // bytes of an encoded Val
	dist      string // "uniform" or "zipf"
	pads      [][]byte

	mu     sync.Mutex
	orders map[int][]int64
}

var (
	workloadOnce sync.Once
	theWorkload  *workload
	workloadErr  error
)

// load returns the run's workload; a bad knob fails b.
func load(b *testing.B) *workload {
	workloadOnce.Do(func() { theWorkload, workloadErr = newWorkload() })
	if workloadErr != nil {
		b.Fatal(workloadErr)
	}
	return theWorkload
}

func newWorkload() (*workload, error) {
	w := &workload{keys: defaultKeys, valueSize: defaultValueSize, dist: "uniform", orders: map[int][]int64{}}
	if s := os.Getenv("STATEGEN_BENCH_KEYS"); s != "" {
		n, err := parseSize(s)
		if err != nil || n < 64 {
			return nil, fmt.Errorf("STATEGEN_BENCH_KEYS=%q: want a number of at least 64, like 10K or 1M", s)
		}
		w.keys = n
	} else if testing.Short() || smokeRun() {
		w.keys = smokeKeys
	}
	if s := os.Getenv("STATEGEN_BENCH_VALUE_SIZE"); s != "" {
		n, err := parseSize(s)
		if err != nil || n < minValueSize || n > maxValueSize {
			return nil, fmt.Errorf("STATEGEN_BENCH_VALUE_SIZE=%q: want a number of bytes from %d to %d", s, minValueSize, maxValueSize)
		}
		w.valueSize = n
	}
	if s := os.Getenv("STATEGEN_BENCH_DIST"); s != "" {
		if s != "uniform" && s != "zipf" {
			return nil, fmt.Errorf("STATEGEN_BENCH_DIST=%q: want uniform or zipf", s)
		}
		w.dist = s
	}
	w.pads = makePads(w.valueSize - 24)
	return w, nil
}

// makePads returns 64 pseudo-random paddings of n bytes, or nils if n is 0.
func makePads(n int) [][]byte {
	r := rand.New(rand.NewPCG(9, 1))
	pads := make([][]byte, 64)
	for i := range pads {
		if n > 0 {
			pads[i] = make([]byte, n)
			for j := range pads[i] {
				pads[i][j] = byte(r.Uint32())
			}
		}
	}
	return pads
}

// val returns the i-th value. Its padding is shared with other values, as
// a value decoded from an event and stored as it is would be.
func (w *workload) val(i int) Val {
	return Val{int64(i), int64(i) * 3, int64(i) * 7, w.pads[i%len(w.pads)]}
}

// fresh returns the i-th value with a padding of its own: the values that
// fill a fixture, so that a Go map holds as many bytes as a store.
func (w *workload) fresh(i int) Val {
	v := w.val(i)
	if v.Pad != nil {
		v.Pad = append([]byte(nil), v.Pad...)
	}
	return v
}

// vals returns listLen values, for ListUpdate and ListAddAll.
func (w *workload) vals() []Val {
	vs := make([]Val, listLen)
	for i := range vs {
		vs[i] = w.val(i)
	}
	return vs
}

// order returns the keys of [0, space) that the operations access, in
// order: a random permutation (uniform), or draws from a Zipf distribution
// with s=1.1 whose hot keys are spread over the key space (zipf).
func (w *workload) order(space int) []int64 {
	space = max(space, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if o, ok := w.orders[space]; ok {
		return o
	}
	var o []int64
	if w.dist == "zipf" {
		spread := perm(space, 7)
		o = make([]int64, max(space, 1<<16))
		if space == 1 {
			clear(o)
		} else {
			z := rand.NewZipf(rand.New(rand.NewPCG(8, 1)), 1.1, 1, uint64(space-1))
			for i := range o {
				o[i] = spread[z.Uint64()]
			}
		}
	} else {
		o = perm(space, 2)
	}
	w.orders[space] = o
	return o
}

// perm returns a random permutation of [0, n) as int64 keys.
func perm(n int, seed uint64) []int64 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]int64, n)
	for i, p := range r.Perm(n) {
		out[i] = int64(p)
	}
	return out
}

// smokeRun reports whether -benchtime asks for at most 10 iterations, as a
// smoke run (-benchtime=1x) does.
func smokeRun() bool {
	f := flag.Lookup("test.benchtime")
	if f == nil {
		return false
	}
	s := f.Value.String()
	if !strings.HasSuffix(s, "x") {
		return false
	}
	n, err := strconv.Atoi(strings.TrimSuffix(s, "x"))
	return err == nil && n <= 10
}

// parseSize parses 100, 10K (thousands) or 1M (binary millions: 1<<20).
func parseSize(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1000, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	}
	n, err := strconv.Atoi(s)
	return n * mult, err
}

// sizeName formats n for a benchmark name: 10K, 100K, 1M, 4M.
func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dK", n/1000)
	}
	return strconv.Itoa(n)
}

func check(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

// sink keeps the values the benchmarks read alive.
var sink Val

// cpuTime returns the user and system CPU time of the process so far.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// threadCPU returns the CPU time of the calling thread so far: with the
// goroutine locked to its thread, the CPU time of the operator alone.
func threadCPU() int64 {
	const rusageThread = 1
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
