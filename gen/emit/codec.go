package emit

import (
	"github.com/dave/jennifer/jen"

	"github.com/stategen/stategen/gen/model"
)

// This file emits the functions behind the codecs: for each composite type,
// value append and decode, the string scan of values that need one, and key
// append and decode. Leaves are inlined as calls to the runtime.

var (
	dst = jen.Id("dst")
	src = jen.Id("src")
)

func (e *emitter) helper(name string) string {
	e.helpers[name] = true
	return reservedPrefix + name
}

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
			wrap := jen.Id(e.helper("FieldError")).Call(jen.Lit(fieldPath(t, f.Name)), jen.Err())
			body = append(body, e.decodeValue(f.Type, jen.Id("v").Dot(f.Name), wrap)...)
		}
		body = append(body, jen.Return(src, jen.Nil()))
	case model.Array:
		if isRawBytes(b) {
			body = append(body,
				jen.If(jen.Len(src).Op("<").Lit(int(b.Len))).Block(
					jen.Return(jen.Nil(), jen.Id(e.helper("ShortError")).Call(jen.Lit(name), jen.Lit(int(b.Len)), jen.Len(src)))),
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
			body = append(body,
				jen.Id("s").Op(":=").Make(e.typ(t), jen.Id("n")),
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
			body = append(body,
				jen.Id("m").Op(":=").Make(e.typ(t), jen.Id("n")),
				jen.For(jen.Range().Id("n")).Block(loop...),
				jen.If(jen.Uint64().Call(jen.Len(jen.Id("m"))).Op("!=").Id("n")).Block(
					jen.Return(jen.Nil(), jen.Id(e.helper("DupError")).Call(jen.Lit(name)))),
				jen.Op("*").Id("v").Op("=").Id("m"),
				jen.Return(src, jen.Nil()))
		}
	case model.Pointer:
		body = append(body,
			jen.If(jen.Len(src).Op("==").Lit(0)).Block(
				jen.Return(jen.Nil(), jen.Id(e.helper("ShortError")).Call(jen.Lit(name), jen.Lit(1), jen.Lit(0)))),
			jen.Switch(src.Clone().Index(jen.Lit(0))).Block(
				jen.Case(jen.Lit(0)).Block(
					jen.Op("*").Id("v").Op("=").Nil(),
					jen.Return(src.Clone().Index(jen.Lit(1), jen.Empty()), jen.Nil())),
				jen.Case(jen.Lit(1)),
				jen.Default().Block(
					jen.Return(jen.Nil(), jen.Id(e.helper("TagError")).Call(jen.Lit(name), src.Clone().Index(jen.Lit(0)))))),
			jen.Id("src").Op("=").Add(src).Index(jen.Lit(1), jen.Empty()),
			jen.Id("p").Op(":=").New(e.typ(b.Elem)),
		)
		body = append(body, e.decodeValue(b.Elem, jen.Op("*").Id("p"), jen.Err())...)
		body = append(body,
			jen.Op("*").Id("v").Op("=").Id("p"),
			jen.Return(src, jen.Nil()))
	}
	e.f.Func().Id(e.fn("DecodeV", t)).
		Params(jen.Id("v").Op("*").Add(e.typ(t)), jen.Id("src").Index().Byte(), jen.Id("a").Op("*").Qual("strings", "Builder")).
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
		jen.Return(jen.Nil(), jen.Id(e.helper("CountError")).Call(jen.Lit(name), jen.Id("n"), jen.Len(src))))
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
		call = jen.Id(e.helper("String")).Call(src, jen.Id("a"))
	} else {
		call = jen.Qual(RuntimePath, "Decode"+leafName[k]+"Value").Call(src)
	}
	return e.leafDecode(t, x, call, ret)
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
// Scans

func (e *emitter) scanFn(t *model.Type) {
	b := t.Base()
	name := t.GoString(e.pkg.Path)
	ret := jen.Return(jen.Lit(0), jen.Nil(), jen.Err())
	var body []jen.Code
	usesM := false
	scan := func(t *model.Type) []jen.Code {
		out, m := e.scan(t, ret)
		usesM = usesM || m
		return out
	}
	switch b.Kind {
	case model.Struct:
		for _, f := range b.Fields {
			body = append(body, scan(f.Type)...)
		}
	case model.Array:
		if isRawBytes(b) {
			body = append(body, e.skip(int(b.Len), ret))
			break
		}
		body = append(body, jen.For(jen.Range().Lit(int(b.Len))).Block(scan(b.Elem)...))
	case model.Slice, model.Map:
		min := b.Elem.MinSize()
		if b.Kind == model.Map {
			min += b.Key.MinSize()
		}
		body = append(body,
			jen.Var().Id("u").Uint64(),
			jen.If(jen.List(jen.Id("u"), src, jen.Err()).Op("=").Qual(RuntimePath, "DecodeUvarint").Call(src), jen.Err().Op("!=").Nil()).Block(ret),
			jen.If(jen.Id("u").Op("==").Lit(0)).Block(jen.Return(jen.Lit(0), src, jen.Nil())),
			jen.Id("c").Op(":=").Id("u").Op("-").Lit(1),
		)
		limit := jen.Uint64().Call(jen.Len(src))
		if min > 1 {
			limit = limit.Op("/").Lit(int(min))
		}
		body = append(body, jen.If(jen.Id("c").Op(">").Add(limit)).Block(
			jen.Return(jen.Lit(0), jen.Nil(), jen.Id(e.helper("CountError")).Call(jen.Lit(name), jen.Id("c"), jen.Len(src)))))
		var loop []jen.Code
		if b.Kind == model.Map {
			loop = append(loop, scan(b.Key)...)
		}
		loop = append(loop, scan(b.Elem)...)
		body = append(body, jen.For(jen.Range().Id("c")).Block(loop...))
	case model.Pointer:
		body = append(body,
			jen.If(jen.Len(src).Op("==").Lit(0)).Block(
				jen.Return(jen.Lit(0), jen.Nil(), jen.Id(e.helper("ShortError")).Call(jen.Lit(name), jen.Lit(1), jen.Lit(0)))),
			jen.Switch(src.Clone().Index(jen.Lit(0))).Block(
				jen.Case(jen.Lit(0)).Block(jen.Return(jen.Lit(0), src.Clone().Index(jen.Lit(1), jen.Empty()), jen.Nil())),
				jen.Case(jen.Lit(1)),
				jen.Default().Block(
					jen.Return(jen.Lit(0), jen.Nil(), jen.Id(e.helper("TagError")).Call(jen.Lit(name), src.Clone().Index(jen.Lit(0)))))),
			jen.Id("src").Op("=").Add(src).Index(jen.Lit(1), jen.Empty()),
		)
		body = append(body, scan(b.Elem)...)
	}
	if usesM {
		body = append([]jen.Code{jen.Var().Id("m").Int()}, body...)
	}
	body = append(body, jen.Return(jen.Id("n"), src, jen.Nil()))
	results := []jen.Code{jen.Id("n").Int(), jen.Id("_").Index().Byte(), jen.Err().Error()}
	e.f.Func().Id(e.fn("Scan", t)).Params(jen.Id("src").Index().Byte()).Params(results...).Block(body...)
	e.f.Line()
}

// skip returns the statement that skips n bytes of src.
func (e *emitter) skip(n int, ret jen.Code) jen.Code {
	return jen.If(jen.List(src, jen.Err()).Op("=").Id(e.helper("Skip")).Call(src, jen.Lit(n)), jen.Err().Op("!=").Nil()).Block(ret)
}

// scan returns the statements that skip a value of type t in src, adding
// its string bytes to the accumulator, and whether they use m.
func (e *emitter) scan(t *model.Type, ret jen.Code) ([]jen.Code, bool) {
	acc := "n"
	if !t.IsLeaf() {
		return []jen.Code{
			jen.If(jen.List(jen.Id("m"), src, jen.Err()).Op("=").Id(e.fn("Scan", t)).Call(src), jen.Err().Op("!=").Nil()).Block(ret),
			jen.Id(acc).Op("+=").Id("m"),
		}, true
	}
	uv := jen.If(jen.List(src, jen.Err()).Op("=").Id(e.helper("SkipVarint")).Call(src), jen.Err().Op("!=").Nil()).Block(ret)
	switch k := t.Base().Kind; k {
	case model.Bool, model.Int8, model.Uint8:
		return []jen.Code{e.skip(1, ret)}, false
	case model.Float32:
		return []jen.Code{e.skip(4, ret)}, false
	case model.Float64:
		return []jen.Code{e.skip(8, ret)}, false
	case model.Time:
		uv2 := jen.If(jen.List(src, jen.Err()).Op("=").Id(e.helper("SkipVarint")).Call(src), jen.Err().Op("!=").Nil()).Block(ret)
		return []jen.Code{uv, uv2}, false
	case model.String:
		return []jen.Code{
			jen.If(jen.List(jen.Id("m"), src, jen.Err()).Op("=").Id(e.helper("ScanString")).Call(src), jen.Err().Op("!=").Nil()).Block(ret),
			jen.Id(acc).Op("+=").Id("m"),
		}, true
	case model.Bytes:
		return []jen.Code{jen.If(jen.List(src, jen.Err()).Op("=").Id(e.helper("SkipBytes")).Call(src), jen.Err().Op("!=").Nil()).Block(ret)}, false
	default:
		return []jen.Code{uv}, false
	}
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
			wrap := jen.Id(e.helper("FieldError")).Call(jen.Lit(fieldPath(t, f.Name)), jen.Err())
			body = append(body, e.decodeKey(f.Type, jen.Id("v").Dot(f.Name), wrap)...)
		}
	case model.Array:
		if isRawBytes(b) {
			body = append(body,
				jen.If(jen.Len(src).Op("<").Lit(int(b.Len))).Block(
					jen.Return(jen.Nil(), jen.Id(e.helper("ShortError")).Call(jen.Lit(name), jen.Lit(int(b.Len)), jen.Len(src)))),
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

// ---------------------------------------------------------------------------
// Helpers

func (e *emitter) emitHelpers() {
	rt := func(name string) jen.Code { return jen.Qual(RuntimePath, name) }
	corrupt := rt("ErrCorrupt")
	bs := jen.Index().Byte()
	defs := map[string]func(){
		"String": func() {
			e.comment(reservedPrefix + "String decodes a length-prefixed string. If a is not nil, the\nstring's bytes are appended to a and the string shares a's memory.")
			e.f.Func().Id(reservedPrefix+"String").Params(jen.Id("src").Add(bs), jen.Id("a").Op("*").Qual("strings", "Builder")).Params(jen.String(), bs, jen.Error()).Block(
				jen.List(jen.Id("n"), jen.Id("rest"), jen.Err()).Op(":=").Add(rt("DecodeLen")).Call(src),
				jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Lit(""), jen.Nil(), jen.Err())),
				jen.If(jen.Id("a").Op("==").Nil()).Block(jen.Return(jen.String().Call(jen.Id("rest").Index(jen.Empty(), jen.Id("n"))), jen.Id("rest").Index(jen.Id("n"), jen.Empty()), jen.Nil())),
				jen.Id("a").Dot("Write").Call(jen.Id("rest").Index(jen.Empty(), jen.Id("n"))),
				jen.Id("s").Op(":=").Id("a").Dot("String").Call(),
				jen.Return(jen.Id("s").Index(jen.Len(jen.Id("s")).Op("-").Id("n"), jen.Empty()), jen.Id("rest").Index(jen.Id("n"), jen.Empty()), jen.Nil()),
			)
		},
		"ScanString": func() {
			e.f.Comment(reservedPrefix + "ScanString skips a length-prefixed string and returns its length.")
			e.f.Func().Id(reservedPrefix+"ScanString").Params(jen.Id("src").Add(bs)).Params(jen.Int(), bs, jen.Error()).Block(
				jen.List(jen.Id("n"), jen.Id("rest"), jen.Err()).Op(":=").Add(rt("DecodeLen")).Call(src),
				jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Lit(0), jen.Nil(), jen.Err())),
				jen.Return(jen.Id("n"), jen.Id("rest").Index(jen.Id("n"), jen.Empty()), jen.Nil()),
			)
		},
		"Skip": func() {
			e.f.Comment(reservedPrefix + "Skip skips n bytes.")
			e.f.Func().Id(reservedPrefix+"Skip").Params(jen.Id("src").Add(bs), jen.Id("n").Int()).Params(bs, jen.Error()).Block(
				jen.If(jen.Len(src).Op("<").Id("n")).Block(jen.Return(jen.Nil(), jen.Id(e.helper("ShortError")).Call(jen.Lit("value"), jen.Id("n"), jen.Len(src)))),
				jen.Return(src.Clone().Index(jen.Id("n"), jen.Empty()), jen.Nil()),
			)
		},
		"SkipVarint": func() {
			e.comment(reservedPrefix + "SkipVarint skips a varint. It only finds the varint's end; the\ndecoder that follows the scan validates it.")
			e.f.Func().Id(reservedPrefix+"SkipVarint").Params(jen.Id("src").Add(bs)).Params(bs, jen.Error()).Block(
				jen.For(jen.List(jen.Id("i"), jen.Id("b")).Op(":=").Range().Add(src)).Block(
					jen.If(jen.Id("b").Op("<").Lit(0x80)).Block(jen.Return(src.Clone().Index(jen.Id("i").Op("+").Lit(1), jen.Empty()), jen.Nil())),
					jen.If(jen.Id("i").Op("==").Lit(9)).Block(jen.Break())),
				jen.Return(jen.Nil(), jen.Id(e.helper("ShortError")).Call(jen.Lit("varint"), jen.Len(src).Op("+").Lit(1), jen.Len(src))),
			)
		},
		"SkipBytes": func() {
			e.f.Comment(reservedPrefix + "SkipBytes skips a []byte value.")
			e.f.Func().Id(reservedPrefix+"SkipBytes").Params(jen.Id("src").Add(bs)).Params(bs, jen.Error()).Block(
				jen.List(jen.Id("u"), jen.Id("rest"), jen.Err()).Op(":=").Add(rt("DecodeUvarint")).Call(src),
				jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
				jen.If(jen.Id("u").Op("==").Lit(0)).Block(jen.Return(jen.Id("rest"), jen.Nil())),
				jen.If(jen.Id("u").Op("-").Lit(1).Op(">").Uint64().Call(jen.Len(jen.Id("rest")))).Block(
					jen.Return(jen.Nil(), jen.Id(e.helper("CountError")).Call(jen.Lit("[]byte"), jen.Id("u").Op("-").Lit(1), jen.Len(jen.Id("rest"))))),
				jen.Return(jen.Id("rest").Index(jen.Id("u").Op("-").Lit(1), jen.Empty()), jen.Nil()),
			)
		},
		"FieldError": func() {
			e.f.Comment(reservedPrefix + "FieldError names the field whose decoding failed.")
			e.f.Func().Id(reservedPrefix+"FieldError").Params(jen.Id("field").String(), jen.Err().Error()).Error().Block(
				jen.Return(jen.Qual("fmt", "Errorf").Call(jen.Lit("%s: %w"), jen.Id("field"), jen.Err())))
		},
		"ShortError": func() {
			e.f.Comment(reservedPrefix + "ShortError reports truncated input.")
			e.f.Func().Id(reservedPrefix+"ShortError").Params(jen.Id("what").String(), jen.List(jen.Id("need"), jen.Id("have")).Int()).Error().Block(
				jen.Return(jen.Qual("fmt", "Errorf").Call(jen.Lit("%w: %s: need %d bytes, have %d"), corrupt, jen.Id("what"), jen.Id("need"), jen.Id("have"))))
		},
		"CountError": func() {
			e.f.Comment(reservedPrefix + "CountError reports a count of elements that the input cannot hold.")
			e.f.Func().Id(reservedPrefix+"CountError").Params(jen.Id("what").String(), jen.Id("n").Uint64(), jen.Id("have").Int()).Error().Block(
				jen.Return(jen.Qual("fmt", "Errorf").Call(jen.Lit("%w: %s: %d elements cannot fit in the %d remaining bytes"), corrupt, jen.Id("what"), jen.Id("n"), jen.Id("have"))))
		},
		"TagError": func() {
			e.f.Comment(reservedPrefix + "TagError reports an invalid pointer tag.")
			e.f.Func().Id(reservedPrefix+"TagError").Params(jen.Id("what").String(), jen.Id("tag").Byte()).Error().Block(
				jen.Return(jen.Qual("fmt", "Errorf").Call(jen.Lit("%w: %s: invalid tag 0x%02x, want 0x00 or 0x01"), corrupt, jen.Id("what"), jen.Id("tag"))))
		},
		"DupError": func() {
			e.f.Comment(reservedPrefix + "DupError reports a map encoding with a key that occurs twice.")
			e.f.Func().Id(reservedPrefix + "DupError").Params(jen.Id("what").String()).Error().Block(
				jen.Return(jen.Qual("fmt", "Errorf").Call(jen.Lit("%w: %s: a key occurs twice"), corrupt, jen.Id("what"))))
		},
	}
	// Helpers used by helpers.
	if e.helpers["Skip"] || e.helpers["SkipVarint"] {
		e.helpers["ShortError"] = true
	}
	if e.helpers["SkipBytes"] {
		e.helpers["CountError"] = true
	}
	done := e.helpers
	for _, h := range sortedSet(done) {
		defs[h]()
		e.f.Line()
	}
}
