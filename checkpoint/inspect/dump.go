package inspect

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"sync/atomic"

	"github.com/stategen/stategen/runtime"
)

// Decoder turns the bytes of an entry into values for Dump to write as
// JSON; a nil result omits the field. HexDecoder is the default.
type Decoder func(e runtime.Entry) (key, namespace, userKey, value any, err error)

// HexDecoder writes every byte string in hex; an empty namespace or user
// key is omitted.
func HexDecoder(e runtime.Entry) (key, namespace, userKey, value any, err error) {
	key, value = hex.EncodeToString(e.Key), hex.EncodeToString(e.Value)
	if len(e.Namespace) > 0 {
		namespace = hex.EncodeToString(e.Namespace)
	}
	if e.UserKey != nil {
		userKey = hex.EncodeToString(e.UserKey)
	}
	return key, namespace, userKey, value, nil
}

// TypedDecoder returns a Decoder that decodes entries with codecs (nil
// codecs omit their field), for Dump to write the values as JSON.
func TypedDecoder[K, N, UK, V any](codecs Codecs[K, N, UK, V]) Decoder {
	return func(e runtime.Entry) (key, namespace, userKey, value any, err error) {
		var r Record[K, N, UK, V]
		if err = decodeKey(codecs.Key, e.Key, &r.Key, "key"); err == nil {
			if err = decodeKey(codecs.Namespace, e.Namespace, &r.Namespace, "namespace"); err == nil {
				if err = decodeKey(codecs.UserKey, e.UserKey, &r.UserKey, "user key"); err == nil {
					err = decodeValue(codecs.Value, e.Value, &r.Value)
				}
			}
		}
		if err != nil {
			return nil, nil, nil, nil, err
		}
		if codecs.Key != nil {
			key = r.Key
		}
		if codecs.Namespace != nil {
			namespace = r.Namespace
		}
		if codecs.UserKey != nil {
			userKey = r.UserKey
		}
		if codecs.Value != nil {
			value = r.Value
		}
		return key, namespace, userKey, value, nil
	}
}

// DumpLine is the JSON object Dump writes per entry, one per line.
type DumpLine struct {
	KeyGroup  int `json:"keyGroup"`
	Key       any `json:"key"`
	Namespace any `json:"namespace,omitempty"`
	UserKey   any `json:"userKey,omitempty"`
	Value     any `json:"value"`
}

// Dump writes every entry of state in operator to w as JSON lines
// (DumpLine), decoded by decode (HexDecoder if nil). It returns the number
// of entries written.
func (c *Checkpoint) Dump(ctx context.Context, w io.Writer, operator, state string, decode Decoder) (int64, error) {
	return c.DumpProgress(ctx, w, operator, state, decode, nil)
}

// DumpProgress is Dump, calling progress (if not nil) about once a second
// from a goroutine of its own with the entries written of the state's
// total and the bytes read.
func (c *Checkpoint) DumpProgress(ctx context.Context, w io.Writer, operator, state string, decode Decoder, progress func(Progress)) (int64, error) {
	if decode == nil {
		decode = HexDecoder
	}
	var done atomic.Int64
	if progress != nil {
		total, err := c.StateEntries(ctx, operator, state)
		if err != nil {
			return 0, err
		}
		stop := c.report(progress, &done, total)
		defer stop()
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	var n int64
	for e, err := range c.Entries(ctx, operator, state) {
		if err != nil {
			bw.Flush()
			return n, err
		}
		l := DumpLine{KeyGroup: e.KeyGroup}
		if l.Key, l.Namespace, l.UserKey, l.Value, err = decode(e.Entry); err != nil {
			bw.Flush()
			return n, err
		}
		if err := enc.Encode(l); err != nil {
			return n, err
		}
		n++
		done.Store(n)
	}
	return n, bw.Flush()
}
