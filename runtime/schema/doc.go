// Package schema is the structural schema of a state's encoding, and the one
// place that decides which changes of a state's types keep its checkpoints
// readable: the generator asks it before deploy (stategen compat), the
// restore path asks it at restore, and both get the same answer.
//
// # Schemas are data
//
// The generator derives a canonical schema string for every state (see
// package gen/model, "Schemas and fingerprints"): the state's kind, and the
// structure of its key, namespace, user key and value types with defined
// types replaced by their structure,
//
//	stategen/v1 list key=string value=struct{Page string;Score float64;Tags []string}
//
// Its fingerprint is a hash of that string. Generated code passes the string
// to the runtime with the fingerprint (runtime.StateSpec.Schema), and every
// checkpoint records it as the writer's schema, so that bytes written by
// yesterday's code can be read without yesterday's Go types. Parse turns
// the string into a State, a tree of Types; String turns it back.
//
// # What may change
//
// Resolve compares the writer's schema (the checkpoint's) with the reader's
// (the code's) and returns a Migration, or an *IncompatibleError that names
// the state, the path of the field at fault, and both sides' types
// ("checkpoint has …, code declares …"). The rules are a superset of
// Flink's POJO evolution and Avro's schema resolution:
//
//   - Keys, namespaces and map user keys keep their bytes. Key groups, the
//     order of sorted states and the identity of entries depend on them, so
//     only changes that leave every key's encoding as it was are allowed:
//     renaming or moving a type, renaming a field of a key struct, int for
//     int64 (and uint for uint64, time.Duration for int64), which encode
//     alike. Anything else — a field added to a key struct, int32 to
//     int64 — is refused.
//   - Values (of Value and List states, and Map and SortedMap values) are
//     resolved field by field, recursively through nested structs, array,
//     slice and pointer elements and map values:
//   - struct fields are matched by name: a field the code added reads as
//     its zero value, a field the code removed is dropped, reordered
//     fields find each other. A Go field renamed with a `stategen:"old"`
//     tag keeps its schema name, and so its data.
//   - integers widen: int8 → int16 → int32 → int64, uint8 → uint16 →
//     uint32 → uint64, and an unsigned integer to a signed one of greater
//     width (uint32 → int64); integers widen to floats (Avro's int → float
//     → double; a float32 holds integers exactly up to 2^24, a float64 up to
//     2^53); float32 widens to float64.
//   - string and []byte convert into each other (Avro's string ↔ bytes); a
//     nil []byte becomes "", "" becomes an empty, non-nil []byte.
//   - a value T may become a pointer *T (non-nil) and back (nil becomes
//     the zero value), with T resolved as above.
//   - map keys of a value may widen like integers (widening never makes two
//     keys equal), but not otherwise change; arrays keep their length.
//   - Anything else is refused: narrowing (int64 → int32, float64 →
//     float32), a type of another family (string → int64, slice → array),
//     a changed state kind or sub-keying. For a value, keep the old type in
//     the code and write a function from it to the new one, marked
//     //stategen:migrate (see runtime.Migration): a restore resolves the
//     checkpoint's schema to the old type's by the rules above, then runs
//     the function. Keys, a state's kind and its sub-keying cannot change
//     even so.
//
// Enums are their underlying integer or string type: widening an enum's
// type is allowed, its values are not checked.
//
// # Migration
//
// A Migration of a changed value schema compiles the resolution into a
// transcoder: it reads a value in the writer's encoding and appends the
// same value in the reader's encoding, as today's generated codec would
// write it, without decoding into Go values. Unchanged subtrees are copied
// as bytes; the rest is converted field by field. The restore path
// (package checkpoint) runs every entry of a changed state through it, on
// every backend, so that the store receives exactly what the new code
// writes; states whose schema did not change are not touched.
package schema
