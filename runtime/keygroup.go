package runtime

import (
	"encoding/binary"
	"fmt"
	"iter"
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// DefaultMaxParallelism is the number of key groups a job uses when the user
// does not choose one. It bounds the parallelism the state can ever be
// rescaled to, and it is fixed for the life of the state.
const DefaultMaxParallelism = 128

// UpperBoundMaxParallelism is the largest valid maxParallelism. Key groups are
// stored in two bytes by some backends and formats; 32768 leaves the top bit
// free.
const UpperBoundMaxParallelism = 1 << 15

// HashKey returns the stable hash of an encoded key: XXH64 with seed 0 over
// the key's order-preserving encoding. The same key hashes to the same value
// in every process, on every machine and in every version of stategen;
// checkpoints depend on it. Backends may reuse it for their own lookups so
// that an operation hashes its key once.
//
// Keys shorter than 32 bytes — int64 keys, UUIDs, most strings — are hashed
// here, in Go: XXH64 of such a key is a few multiplies, and a call to
// xxhash.Sum64's assembly costs as much again in argument passing on the
// stack. Longer keys go to xxhash.Sum64. TestHashKeyIsXXH64 holds the two
// paths to the same values.
func HashKey(encodedKey []byte) uint64 {
	if len(encodedKey) >= 32 {
		return xxhash.Sum64(encodedKey)
	}
	return xxh64Short(encodedKey)
}

// The primes of XXH64.
const (
	xxPrime1 uint64 = 0x9E3779B185EBCA87
	xxPrime2 uint64 = 0xC2B2AE3D27D4EB4F
	xxPrime3 uint64 = 0x165667B19E3779F9
	xxPrime4 uint64 = 0x85EBCA77C2B2AE63
	xxPrime5 uint64 = 0x27D4EB2F165667C5
)

// xxh64Short is XXH64 with seed 0 of b, len(b) < 32: the algorithm's path
// for inputs without a full 32-byte stripe, then its final avalanche.
func xxh64Short(b []byte) uint64 {
	if len(b) == 8 {
		// An int64 key, the commonest: its one lane without the loop's
		// bounds checks and branches (BenchmarkHashKey/len=8: 6.6 -> 4.7 ns).
		return xxh64Of8(binary.LittleEndian.Uint64(b))
	}
	h := xxPrime5 + uint64(len(b))
	for ; len(b) >= 8; b = b[8:] {
		h = bits.RotateLeft64(h^xxh64Lane(binary.LittleEndian.Uint64(b)), 27)*xxPrime1 + xxPrime4
	}
	if len(b) >= 4 {
		h = bits.RotateLeft64(h^uint64(binary.LittleEndian.Uint32(b))*xxPrime1, 23)*xxPrime2 + xxPrime3
		b = b[4:]
	}
	for _, c := range b {
		h = bits.RotateLeft64(h^uint64(c)*xxPrime5, 11) * xxPrime1
	}
	return xxh64Avalanche(h)
}

// xxh64Of8 is XXH64 with seed 0 of an 8-byte input, lane its bytes read
// as a little-endian number.
func xxh64Of8(lane uint64) uint64 {
	return xxh64Avalanche(bits.RotateLeft64((xxPrime5+8)^xxh64Lane(lane), 27)*xxPrime1 + xxPrime4)
}

// hashKeyWord is HashKey of an 8-byte key encoding given as a big-endian
// number (KeyWord).
func hashKeyWord(w uint64) uint64 { return xxh64Of8(bits.ReverseBytes64(w)) }

// xxh64Lane is XXH64's round of an 8-byte lane of the input.
func xxh64Lane(v uint64) uint64 { return bits.RotateLeft64(v*xxPrime2, 31) * xxPrime1 }

// xxh64Avalanche is XXH64's final mix.
func xxh64Avalanche(h uint64) uint64 {
	h ^= h >> 33
	h *= xxPrime2
	h ^= h >> 29
	h *= xxPrime3
	h ^= h >> 32
	return h
}

// KeyGroupOfHash returns the key group of a key whose HashKey is hash. It does
// not validate maxParallelism; callers hold a validated value (see
// ValidateMaxParallelism). It panics on a zero maxParallelism, like an integer
// division by zero would.
func KeyGroupOfHash(hash uint64, maxParallelism int) int {
	m := uint64(maxParallelism)
	if m&(m-1) == 0 {
		// A power of two (the default 128 is one): a mask gives the same
		// result as the modulo without a 64-bit division on the hot path.
		return int(hash & (m - 1))
	}
	return int(hash % m)
}

// ValidateMaxParallelism reports whether maxParallelism is in
// [1, UpperBoundMaxParallelism]. The error wraps ErrInvalidParallelism.
func ValidateMaxParallelism(maxParallelism int) error {
	if maxParallelism < 1 || maxParallelism > UpperBoundMaxParallelism {
		return fmt.Errorf("%w: maxParallelism %d is outside [1, %d]",
			ErrInvalidParallelism, maxParallelism, UpperBoundMaxParallelism)
	}
	return nil
}

// ValidateParallelism reports whether maxParallelism is valid and parallelism
// is in [1, maxParallelism]. The error wraps ErrInvalidParallelism.
func ValidateParallelism(maxParallelism, parallelism int) error {
	if err := ValidateMaxParallelism(maxParallelism); err != nil {
		return err
	}
	if parallelism < 1 || parallelism > maxParallelism {
		return fmt.Errorf("%w: parallelism %d is outside [1, maxParallelism=%d]",
			ErrInvalidParallelism, parallelism, maxParallelism)
	}
	return nil
}

// KeyGroupForKey returns the key group of an encoded key:
// HashKey(encodedKey) mod maxParallelism.
func KeyGroupForKey(encodedKey []byte, maxParallelism int) (int, error) {
	if err := ValidateMaxParallelism(maxParallelism); err != nil {
		return 0, err
	}
	return KeyGroupOfHash(HashKey(encodedKey), maxParallelism), nil
}

// OperatorIndexForKeyGroup returns the index, in [0, parallelism), of the
// operator instance that owns key group keyGroup:
// keyGroup * parallelism / maxParallelism.
func OperatorIndexForKeyGroup(keyGroup, maxParallelism, parallelism int) (int, error) {
	if err := ValidateParallelism(maxParallelism, parallelism); err != nil {
		return 0, err
	}
	if keyGroup < 0 || keyGroup >= maxParallelism {
		return 0, fmt.Errorf("%w: key group %d is outside [0, %d)",
			ErrInvalidKeyGroup, keyGroup, maxParallelism)
	}
	return operatorIndex(keyGroup, maxParallelism, parallelism), nil
}

func operatorIndex(keyGroup, maxParallelism, parallelism int) int {
	return keyGroup * parallelism / maxParallelism
}

// OperatorIndexForKey returns the index of the operator instance that owns the
// state of an encoded key. A router in front of the operators (a Kafka
// partitioner, an RPC shuffle) uses it to send each record to the instance
// that holds its key's state.
func OperatorIndexForKey(encodedKey []byte, maxParallelism, parallelism int) (int, error) {
	if err := ValidateParallelism(maxParallelism, parallelism); err != nil {
		return 0, err
	}
	kg := KeyGroupOfHash(HashKey(encodedKey), maxParallelism)
	return operatorIndex(kg, maxParallelism, parallelism), nil
}

// KeyGroupRange is a contiguous, half-open range of key groups
// [Start, End). The zero value is the empty range.
type KeyGroupRange struct {
	Start int // first key group in the range
	End   int // one past the last key group in the range
}

// FullRange returns [0, maxParallelism), the key groups of a job that runs
// with parallelism 1.
func FullRange(maxParallelism int) KeyGroupRange {
	return KeyGroupRange{Start: 0, End: maxParallelism}
}

// KeyGroupRangeForOperator returns the key groups owned by operator index of
// parallelism operators: [ceil(index*maxP/p), floor(((index+1)*maxP-1)/p)] in
// closed form, returned half-open. The ranges of operators 0..p-1 are
// non-empty, contiguous, ordered and together cover [0, maxP).
func KeyGroupRangeForOperator(maxParallelism, parallelism, index int) (KeyGroupRange, error) {
	if err := ValidateParallelism(maxParallelism, parallelism); err != nil {
		return KeyGroupRange{}, err
	}
	if index < 0 || index >= parallelism {
		return KeyGroupRange{}, fmt.Errorf("%w: operator index %d is outside [0, parallelism=%d)",
			ErrInvalidParallelism, index, parallelism)
	}
	start := (index*maxParallelism + parallelism - 1) / parallelism
	last := ((index+1)*maxParallelism - 1) / parallelism
	return KeyGroupRange{Start: start, End: last + 1}, nil
}

// Len returns the number of key groups in r.
func (r KeyGroupRange) Len() int {
	if r.End <= r.Start {
		return 0
	}
	return r.End - r.Start
}

// Empty reports whether r holds no key group.
func (r KeyGroupRange) Empty() bool { return r.Len() == 0 }

// Contains reports whether key group kg is in r.
func (r KeyGroupRange) Contains(kg int) bool { return kg >= r.Start && kg < r.End }

// Intersect returns the key groups in both r and o (possibly empty).
func (r KeyGroupRange) Intersect(o KeyGroupRange) KeyGroupRange {
	s := max(r.Start, o.Start)
	e := min(r.End, o.End)
	if e <= s {
		return KeyGroupRange{}
	}
	return KeyGroupRange{Start: s, End: e}
}

// All returns the key groups of r in ascending order.
func (r KeyGroupRange) All() iter.Seq[int] {
	return func(yield func(int) bool) {
		for kg := r.Start; kg < r.End; kg++ {
			if !yield(kg) {
				return
			}
		}
	}
}

// String formats r as "[start, end)".
func (r KeyGroupRange) String() string { return fmt.Sprintf("[%d, %d)", r.Start, r.End) }

// Validate reports whether r is a non-empty range within [0, maxParallelism).
func (r KeyGroupRange) Validate(maxParallelism int) error {
	if err := ValidateMaxParallelism(maxParallelism); err != nil {
		return err
	}
	if r.Start < 0 || r.End > maxParallelism || r.Start >= r.End {
		return fmt.Errorf("%w: key-group range %v is empty or outside [0, %d)",
			ErrInvalidKeyGroup, r, maxParallelism)
	}
	return nil
}
