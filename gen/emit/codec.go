package emit

import (
	"github.com/dave/jennifer/jen"

	"github.com/stategen/stategen/gen/model"
)

// This file emits the functions behind the codecs: for each composite type,
// value append and decode, and key append and decode. Leaves are inlined as
// calls to the runtime.

var (
	dst = jen.Id("dst")
	src = jen.Id("src")
)

// rt returns a reference to the runtime function name. The generated
// codecs call the runtime's helpers (runtime/codec_gen.go) rather than
// carrying their own, so their errors read like the runtime's.
func rt(name string) *jen.Statement { return jen.Qual(RuntimePath, name) }

// isRawBytes reports whether t is an array of (unnamed) bytes, copied as is.
func isRawBytes(b *model.Type) bool {
	return b.Kind == model.Array && b.Elem.Kind == model.Uint8
}

func (e *emitter) tmpName() string {
	e.tmp++
	return "t" + itoa(e.tmp)
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// ---------------------------------------------------------------------------
// Values

func (e *emitter) appendValueFn(t *model.Type) {
	b := t.Base()
	v := jen.Id("v")
	var body []jen.Code
	switch b.Kind {
	case model.Struct:
		for _, f := range b.Fields {
			body = append(body, e.appendValue(f.Type, jen.Id("v").Dot(f.Name)))
		}
	case model.Array:
		if isRawBytes(b) {
			body = append(body, jen.Return(jen.Append(dst, jen.Id("v").Index(jen.Empty(), jen.Empty()).Op("..."))))
			break
		}
		body = append(body, jen.For(jen.Id("i").Op(":=").Range().Add(v)).Block(
			e.appendValue(b.Elem, jen.Id("v").Index(jen.Id("i")))))
	case model.Slice:
		body = append(body,
			jen.If(jen.Id("v").Op("==").Nil()).Block(jen.Return(jen.Append(dst, jen.Lit(0)))),
			jen.Id("dst").Op("=").Qual(RuntimePath, "AppendUvarint").Call(dst, jen.Uint64().Call(jen.Len(v)).Op("+").Lit(1)),
			jen.For(jen.Id("i").Op(":=").Range().Add(v)).Block(
				e.appendValue(b.Elem, jen.Id("v").Index(jen.Id("i")))))
	case model.Map:
		body = append(body,
			jen.If(jen.Id("v").Op("==").Nil()).Block(jen.Return(jen.Append(dst, jen.Lit(0)))),
			jen.Id("dst").Op("=").Qual(RuntimePath, "AppendUvarint").Call(dst, jen.Uint64().Call(jen.Len(v)).Op("+").Lit(1)),
			jen.For(jen.List(jen.Id("k"), jen.Id("x")).Op(":=").Range().Add(v)).Block(
				e.appendValue(b.Key, jen.Id("k")),
				e.appendValue(b.Elem, jen.Id("x"))))
	case model.Pointer:
		body = append(body,
			jen.If(jen.Id("v").Op("==").Nil()).Block(jen.Return(jen.Append(dst, jen.Lit(0)))),
			jen.Id("dst").Op("=").Append(dst, jen.Lit(1)),
			e.appendValue(b.Elem, jen.Op("*").Id("v")))
	}
	if len(body) == 0 || !isReturn(b) {
		body = append(body, jen.Return(dst))
	}
	e.f.Func().Id(e.fn("AppendV", t)).Params(jen.Id("dst").Index().Byte(), jen.Id("v").Add(e.param(t))).Index().Byte().Block(body...)
	e.f.Line()
}

// isReturn reports whether the append body of b already ends in a return.
func isReturn(b *model.Type) bool { return isRawBytes(b) }

// appendValue returns the statement that appends the value encoding of the
// addressable expression x of type t to dst.
func (e *emitter) appendValue(t *model.Type, x jen.Code) jen.Code {
	if t.IsLeaf() {
		return jen.Id("dst").Op("=").Qual(RuntimePath, "Append"+leafName[t.Base().Kind]+"Value").Call(dst, e.leafArg(t, x))
	}
	return jen.Id("dst").Op("=").Id(e.fn("AppendV", t)).Call(dst, arg(t, x))
}

func (e *emitter) decodeValueFn(t *model.Type) {
	b := t.Base()
	name := t.GoString(e.pkg.Path)
	e.tmp = 0
	var body []jen.Code
	switch b.Kind {
	case model.Struct:
		for _, f := range b.Fields {
			wrap := rt("FieldError").Call(jen.Lit(fieldPath(t, f.Name)), jen.Err())
			body = append(body, e.decodeValue(f.Type, jen.Id("v").Dot(f.Name), wrap)...)
		}
		body = append(body, jen.Return(src, jen.Nil()))
	case model.Array:
		if isRawBytes(b) {
			body = append(body,
				jen.If(jen.Len(src).Op("<").Lit(int(b.Len))).Block(
					jen.Return(jen.Nil(), rt("ShortError").Call(jen.Lit(name), jen.Lit(int(b.Len)), jen.Len(src)))),
				jen.Copy(jen.Id("v").Index(jen.Empty(), jen.Empty()), src),
				jen.Return(src.Clone().Index(jen.Lit(int(b.Len)), jen.Empty()), jen.Nil()))
			break
		}
		body = append(body,
			jen.For(jen.Id("i").Op(":=").Range().Id("v")).Block(
				e.decodeValue(b.Elem, jen.Id("v").Index(jen.Id("i")), jen.Err())...),
			jen.Return(src, jen.Nil()))
	case model.Slice, model.Map:
		min := b.Elem.MinSize()
		if b.Kind == model.Map {
			min += b.Key.MinSize()
		}
		body = append(body,
			jen.Var().Id("u").Uint64(),
			jen.If(jen.List(jen.Id("u"), src, jen.Err()).Op("=").Qual(RuntimePath, "DecodeUvarint").Call(src), jen.Err().Op("!=").Nil()).Block(
				jen.Return(jen.Nil(), jen.Err())),
			jen.If(jen.Id("u").Op("==").Lit(0)).Block(
				jen.Op("*").Id("v").Op("=").Nil(),
				jen.Return(src, jen.Nil())),
			jen.Id("n").Op(":=").Id("u").Op("-").Lit(1),
			e.countCheck(name, min),
		)
		if b.Kind == model.Slice {
			// The slice *v holds is reused when it is large enough
			// (runtime.IntoDecoder); decoding into a nil slice makes one
			// (an empty slice is not nil).
			body = append(body,
				jen.Id("s").Op(":=").Op("*").Id("v"),
				jen.If(jen.Id("s").Op("!=").Nil().Op("&&").Uint64().Call(jen.Cap(jen.Id("s"))).Op(">=").Id("n")).Block(
					jen.Id("s").Op("=").Id("s").Index(jen.Empty(), jen.Id("n"))).Else().Block(
					jen.Id("s").Op("=").Make(e.typ(t), jen.Id("n"))),
				jen.For(jen.Id("i").Op(":=").Range().Id("s")).Block(
					e.decodeValue(b.Elem, jen.Id("s").Index(jen.Id("i")), jen.Err())...),
				jen.Op("*").Id("v").Op("=").Id("s"),
				jen.Return(src, jen.Nil()))
		} else {
			loop := []jen.Code{
				jen.Var().Id("k").Add(e.typ(b.Key)),
				jen.Var().Id("x").Add(e.typ(b.Elem)),
			}
			loop = append(loop, e.decodeValue(b.Key, jen.Id("k"), jen.Err())...)
			loop = append(loop, e.decodeValue(b.Elem, jen.Id("x"), jen.Err())...)
			loop = append(loop, jen.Id("m").Index(jen.Id("k")).Op("=").Id("x"))
			// The map *v holds is cleared and reused
			// (runtime.IntoDecoder); decoding into a zero value makes one.
			body = append(body,
				jen.Id("m").Op(":=").Op("*").Id("v"),
				jen.If(jen.Id("m").Op("==").Nil()).Block(
					jen.Id("m").Op("=").Make(e.typ(t), jen.Id("n"))).Else().Block(
					jen.Clear(jen.Id("m"))),
				jen.For(jen.Range().Id("n")).Block(loop...),
				jen.If(jen.Uint64().Call(jen.Len(jen.Id("m"))).Op("!=").Id("n")).Block(
					jen.Return(jen.Nil(), rt("DupKeyError").Call(jen.Lit(name)))),
				jen.Op("*").Id("v").Op("=").Id("m"),
				jen.Return(src, jen.Nil()))
		}
	case model.Pointer:
		body = append(body,
			jen.If(jen.Len(src).Op("==").Lit(0)).Block(
				jen.Return(jen.Nil(), rt("ShortError").Call(jen.Lit(name), jen.Lit(1), jen.Lit(0)))),
			jen.Switch(src.Clone().Index(jen.Lit(0))).Block(
				jen.Case(jen.Lit(0)).Block(
					jen.Op("*").Id("v").Op("=").Nil(),
					jen.Return(src.Clone().Index(jen.Lit(1), jen.Empty()), jen.Nil())),
				jen.Case(jen.Lit(1)),
				jen.Default().Block(
					jen.Return(jen.Nil(), rt("TagError").Call(jen.Lit(name), src.Clone().Index(jen.Lit(0)))))),
			jen.Id("src").Op("=").Add(src).Index(jen.Lit(1), jen.Empty()),
			jen.Id("p").Op(":=").New(e.typ(b.Elem)),
		)
		body = append(body, e.decodeValue(b.Elem, jen.Op("*").Id("p"), jen.Err())...)
		body = append(body,
			jen.Op("*").Id("v").Op("=").Id("p"),
			jen.Return(src, jen.Nil()))
	}
	e.f.Func().Id(e.fn("DecodeV", t)).
		Params(jen.Id("v").Op("*").Add(e.typ(t)), jen.Id("src").Index().Byte(), jen.Id("a").Op("*").Qual(RuntimePath, "StringBlock")).
		Params(jen.Id("_").Index().Byte(), jen.Err().Error()).Block(body...)
	e.f.Line()
}

// countCheck returns the statement that rejects a count n of elements of
// at least min bytes each that cannot fit in what is left of src.
func (e *emitter) countCheck(name string, min int64) jen.Code {
	limit := jen.Uint64().Call(jen.Len(src))
	if min > 1 {
		limit = limit.Op("/").Lit(int(min))
	}
	return jen.If(jen.Id("n").Op(">").Add(limit)).Block(
		jen.Return(jen.Nil(), rt("CountError").Call(jen.Lit(name), jen.Id("n"), jen.Len(src))))
}

func fieldPath(t *model.Type, field string) string {
	owner := "struct"
	if t.Kind == model.Named {
		owner = t.Name
	}
	return owner + "." + field
}

// decodeValue returns the statements that decode a value of type t from
// src into the addressable expression x, returning wrap on error.
func (e *emitter) decodeValue(t *model.Type, x jen.Code, wrap jen.Code) []jen.Code {
	ret := jen.Return(jen.Nil(), wrap)
	if !t.IsLeaf() {
		return []jen.Code{jen.If(
			jen.List(src, jen.Err()).Op("=").Id(e.fn("DecodeV", t)).Call(jen.Op("&").Add(x), src, jen.Id("a")),
			jen.Err().Op("!=").Nil()).Block(ret)}
	}
	k := t.Base().Kind
	var call jen.Code
	if k == model.String {
		call = rt("DecodeStringValueIn").Call(src, jen.Id("a"))
	} else {
		call = jen.Qual(RuntimePath, "Decode"+leafName[k]+"Value").Call(src)
	}
	slow := e.leafDecode(t, x, call, ret)
	fast := fastPath(k)
	if fast == nil {
		return slow
	}
	// The fast path decodes most values without a call; the runtime's
	// decoder takes the rest and reports the errors.
	val := fast.value
	if t.Kind == model.Named {
		val = jen.Add(e.typ(t)).Call(val)
	}
	return []jen.Code{jen.If(jen.List(jen.Id("fast"), jen.Id("size")).Op(":=").Add(fast.prefix), jen.Id("size").Op(">").Lit(0)).Block(
		jen.List(x, src).Op("=").List(val, src.Clone().Index(jen.Id("size"), jen.Empty())),
	).Else().Add(elseOf(slow))}
}

// fastDecode is the fast path of a leaf kind's value decoding: prefix
// yields fast and its length size (0 if the full decoder must run), and
// value is the decoded value made of fast. The names are none that
// generated decoders use for their own variables.
type fastDecode struct{ prefix, value jen.Code }

// fastPath returns the fast path of the value decoding of leaf kind k, or
// nil if it has none: the kinds whose every varint of up to 9 bytes is a
// valid value.
func fastPath(k model.Kind) *fastDecode {
	x := jen.Id("fast")
	switch k {
	case model.Int64, model.Duration:
		v := rt("Unzigzag").Call(x)
		if k == model.Duration {
			v = jen.Qual("time", "Duration").Call(v)
		}
		return &fastDecode{rt("UvarintPrefix").Call(src), v}
	case model.Uint64:
		return &fastDecode{rt("UvarintPrefix").Call(src), x}
	case model.Time:
		return &fastDecode{rt("TimeValuePrefix").Call(src), x}
	}
	return nil
}

// elseOf returns the statement of a one-statement decode as the else branch
// of an if: an if statement chains (else if), a block is one.
func elseOf(slow []jen.Code) jen.Code {
	return slow[0]
}

// leafDecode assigns the result of call, a runtime leaf decoder, to x.
func (e *emitter) leafDecode(t *model.Type, x, call, ret jen.Code) []jen.Code {
	if t.Kind != model.Named {
		return []jen.Code{jen.If(jen.List(x, src, jen.Err()).Op("=").Add(call), jen.Err().Op("!=").Nil()).Block(ret)}
	}
	tmp := e.tmpName()
	return []jen.Code{jen.Block(
		jen.Var().Id(tmp).Add(baseLeafType(t.Under.Kind)),
		jen.If(jen.List(jen.Id(tmp), src, jen.Err()).Op("=").Add(call), jen.Err().Op("!=").Nil()).Block(ret),
		jen.Add(x).Op("=").Add(e.typ(t)).Call(jen.Id(tmp)),
	)}
}

// ---------------------------------------------------------------------------
// Keys

func (e *emitter) appendKeyFn(t *model.Type) {
	b := t.Base()
	var body []jen.Code
	switch b.Kind {
	case model.Struct:
		for _, f := range b.Fields {
			body = append(body, e.appendKey(f.Type, jen.Id("v").Dot(f.Name)))
		}
		body = append(body, jen.Return(dst))
	case model.Array:
		if isRawBytes(b) {
			body = append(body, jen.Return(jen.Append(dst, jen.Id("v").Index(jen.Empty(), jen.Empty()).Op("..."))))
			break
		}
		body = append(body, jen.For(jen.Id("i").Op(":=").Range().Id("v")).Block(
			e.appendKey(b.Elem, jen.Id("v").Index(jen.Id("i")))), jen.Return(dst))
	}
	e.f.Func().Id(e.fn("AppendK", t)).Params(jen.Id("dst").Index().Byte(), jen.Id("v").Add(e.param(t))).Index().Byte().Block(body...)
	e.f.Line()
}

func (e *emitter) appendKey(t *model.Type, x jen.Code) jen.Code {
	if t.IsLeaf() {
		return jen.Id("dst").Op("=").Qual(RuntimePath, "Append"+leafName[t.Base().Kind]+"Key").Call(dst, e.leafArg(t, x))
	}
	return jen.Id("dst").Op("=").Id(e.fn("AppendK", t)).Call(dst, arg(t, x))
}

func (e *emitter) decodeKeyFn(t *model.Type) {
	b := t.Base()
	name := t.GoString(e.pkg.Path)
	e.tmp = 0
	var body []jen.Code
	switch b.Kind {
	case model.Struct:
		for _, f := range b.Fields {
			wrap := rt("FieldError").Call(jen.Lit(fieldPath(t, f.Name)), jen.Err())
			body = append(body, e.decodeKey(f.Type, jen.Id("v").Dot(f.Name), wrap)...)
		}
	case model.Array:
		if isRawBytes(b) {
			body = append(body,
				jen.If(jen.Len(src).Op("<").Lit(int(b.Len))).Block(
					jen.Return(jen.Nil(), rt("ShortError").Call(jen.Lit(name), jen.Lit(int(b.Len)), jen.Len(src)))),
				jen.Copy(jen.Id("v").Index(jen.Empty(), jen.Empty()), src),
				jen.Return(src.Clone().Index(jen.Lit(int(b.Len)), jen.Empty()), jen.Nil()))
			break
		}
		body = append(body, jen.For(jen.Id("i").Op(":=").Range().Id("v")).Block(
			e.decodeKey(b.Elem, jen.Id("v").Index(jen.Id("i")), jen.Err())...))
	}
	if !isRawBytes(b) {
		body = append(body, jen.Return(src, jen.Nil()))
	}
	e.f.Func().Id(e.fn("DecodeK", t)).
		Params(jen.Id("v").Op("*").Add(e.typ(t)), jen.Id("src").Index().Byte()).
		Params(jen.Id("_").Index().Byte(), jen.Err().Error()).Block(body...)
	e.f.Line()
}

func (e *emitter) decodeKey(t *model.Type, x jen.Code, wrap jen.Code) []jen.Code {
	ret := jen.Return(jen.Nil(), wrap)
	if !t.IsLeaf() {
		return []jen.Code{jen.If(
			jen.List(src, jen.Err()).Op("=").Id(e.fn("DecodeK", t)).Call(jen.Op("&").Add(x), src),
			jen.Err().Op("!=").Nil()).Block(ret)}
	}
	call := jen.Qual(RuntimePath, "Decode"+leafName[t.Base().Kind]+"Key").Call(src)
	return e.leafDecode(t, x, call, ret)
}
