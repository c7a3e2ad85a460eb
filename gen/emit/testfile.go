package emit

import (
	"github.com/dave/jennifer/jen"

	"github.com/stategen/stategen/gen/model"
)

// This file emits the generated test file: random values, equality and
// comparison functions per type, and the tests and fuzz target that use
// them. Tests may use reflection (fmt's %#v); the code under test does not.

// TestFile returns the generated test file of pkg, or nil if pkg declares no
// state.
func TestFile(pkg *model.Package) ([]byte, error) {
	if len(pkg.Structs) == 0 {
		return nil, nil
	}
	e, err := newEmitter(pkg)
	if err != nil {
		return nil, err
	}
	e.f = e.newFile()
	e.f.ImportAlias("runtime", "goruntime")
	var cases []jen.Code
	randFns, equalFns, keyFns := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, id := range sortedKeys(e.codecs) {
		c := e.codecs[id]
		if c.builtin {
			continue
		}
		markTest(c.t, randFns)
		if c.value {
			markTest(c.t, equalFns)
			cases = append(cases, e.checkValue(c))
		}
		if c.key {
			markTest(c.t, keyFns)
			cases = append(cases, e.checkKey(c))
		}
	}
	if len(cases) == 0 {
		// Only the runtime's built-in codecs: nothing to test here.
		return nil, nil
	}
	e.comment(reservedPrefix + "CodecTest is a generated codec under test. fuzz decodes arbitrary bytes\nand returns how many keys or values it decoded, or an error if what it\ndecoded breaks a law of the codec.")
	e.f.Type().Id(reservedPrefix+"CodecTest").Struct(
		jen.Id("name").String(),
		jen.Id("check").Func().Params(jen.Op("*").Qual("testing", "T"), jen.Op("*").Qual("math/rand/v2", "Rand")),
		jen.Id("fuzz").Func().Params(jen.Index().Byte()).Params(jen.Int(), jen.Error()),
		jen.Id("seed").Func().Params(jen.Op("*").Qual("math/rand/v2", "Rand")).Index().Byte(),
	)
	e.f.Line()
	e.f.Var().Id(reservedPrefix + "CodecTests").Op("=").Index().Id(reservedPrefix + "CodecTest").Values(cases...)
	e.f.Line()
	e.tests()
	for _, id := range sortedSet(randFns) {
		e.randFn(e.types[id])
	}
	for _, id := range sortedSet(equalFns) {
		e.equalFn(e.types[id], false)
	}
	for _, id := range sortedSet(keyFns) {
		e.equalFn(e.types[id], true)
		e.compareFn(e.types[id])
	}
	e.testHelpers()
	return render(e.f)
}

// markTest records the composite types inside t.
func markTest(t *model.Type, set map[string]bool) {
	if t.IsLeaf() || set[t.ID()] {
		return
	}
	set[t.ID()] = true
	for _, c := range children(t) {
		markTest(c, set)
	}
}

var (
	rnd   = jen.Id("r")
	tT    = jen.Id("t")
	randT = jen.Op("*").Qual("math/rand/v2", "Rand")
)

// randInto returns the statement that sets the addressable x of type t to
// a random value.
func (e *emitter) randInto(t *model.Type, x jen.Code, depth jen.Code, nan jen.Code) jen.Code {
	if !t.IsLeaf() {
		return jen.Id(e.fn("Rand", t)).Call(rnd, jen.Op("&").Add(x), depth, nan)
	}
	var v jen.Code
	switch k := t.Base().Kind; {
	case k == model.Bool:
		v = rnd.Clone().Dot("IntN").Call(jen.Lit(2)).Op("==").Lit(1)
	case k.IsFloat():
		v = jen.Id(reservedPrefix+"RandFloat").Call(rnd, nan)
	case k == model.String:
		v = jen.Id(reservedPrefix + "RandString").Call(rnd)
	case k == model.Bytes:
		v = jen.Id(reservedPrefix + "RandBytes").Call(rnd)
	case k == model.Time:
		v = jen.Id(reservedPrefix + "RandTime").Call(rnd)
	default:
		v = jen.Id(reservedPrefix + "RandBits").Call(rnd)
	}
	return jen.Add(x).Op("=").Add(e.typ(t)).Call(v)
}

func (e *emitter) randFn(t *model.Type) {
	b := t.Base()
	d1 := jen.Id("depth").Op("+").Lit(1)
	nan := jen.Id("nan")
	var body []jen.Code
	size := jen.Id("r").Dot("IntN").Call(jen.Max(jen.Lit(1), jen.Lit(4).Op("-").Id("depth")))
	switch b.Kind {
	case model.Struct:
		for _, f := range b.Fields {
			body = append(body, e.randInto(f.Type, jen.Id("v").Dot(f.Name), jen.Id("depth"), nan))
		}
	case model.Array:
		body = append(body, jen.For(jen.Id("i").Op(":=").Range().Id("v")).Block(
			e.randInto(b.Elem, jen.Id("v").Index(jen.Id("i")), jen.Id("depth"), nan)))
	case model.Slice:
		body = append(body,
			jen.If(jen.Id("r").Dot("IntN").Call(jen.Lit(5)).Op("==").Lit(0)).Block(jen.Op("*").Id("v").Op("=").Nil(), jen.Return()),
			jen.Id("s").Op(":=").Make(e.typ(t), size),
			jen.For(jen.Id("i").Op(":=").Range().Id("s")).Block(e.randInto(b.Elem, jen.Id("s").Index(jen.Id("i")), d1, nan)),
			jen.Op("*").Id("v").Op("=").Id("s"))
	case model.Map:
		body = append(body,
			jen.If(jen.Id("r").Dot("IntN").Call(jen.Lit(5)).Op("==").Lit(0)).Block(jen.Op("*").Id("v").Op("=").Nil(), jen.Return()),
			jen.Id("n").Op(":=").Add(size),
			jen.Id("m").Op(":=").Make(e.typ(t), jen.Id("n")),
			jen.For(jen.Range().Id("n")).Block(
				jen.Var().Id("k").Add(e.typ(b.Key)),
				jen.Var().Id("x").Add(e.typ(b.Elem)),
				jen.Comment("NaN keys could not be looked up by the equality."),
				e.randInto(b.Key, jen.Id("k"), d1, jen.False()),
				e.randInto(b.Elem, jen.Id("x"), d1, nan),
				jen.Id("m").Index(jen.Id("k")).Op("=").Id("x")),
			jen.Op("*").Id("v").Op("=").Id("m"))
	case model.Pointer:
		body = append(body,
			jen.If(jen.Id("r").Dot("IntN").Call(jen.Lit(3)).Op("==").Lit(0)).Block(jen.Op("*").Id("v").Op("=").Nil(), jen.Return()),
			jen.Id("p").Op(":=").New(e.typ(b.Elem)),
			e.randInto(b.Elem, jen.Op("*").Id("p"), d1, nan),
			jen.Op("*").Id("v").Op("=").Id("p"))
	}
	e.f.Func().Id(e.fn("Rand", t)).Params(jen.Id("r").Add(randT), jen.Id("v").Op("*").Add(e.typ(t)), jen.Id("depth").Int(), jen.Id("nan").Bool()).Block(body...)
	e.f.Line()
}

// equalExpr returns the expression that compares the addressable x and y
// of type t: bitwise for float values, canonically for keys.
func (e *emitter) equalExpr(t *model.Type, x, y jen.Code, key bool) jen.Code {
	if !t.IsLeaf() {
		name := "Equal"
		if key {
			name = "KeyEqual"
		}
		return jen.Id(e.fn(name, t)).Call(jen.Op("&").Add(x), jen.Op("&").Add(y))
	}
	switch k := t.Base().Kind; {
	case k.IsFloat() && key:
		return jen.Add(x).Op("==").Add(y).Op("||").Add(x).Op("!=").Add(x).Op("&&").Add(y).Op("!=").Add(y)
	case k == model.Float32:
		return jen.Qual("math", "Float32bits").Call(jen.Float32().Call(x)).Op("==").Qual("math", "Float32bits").Call(jen.Float32().Call(y))
	case k == model.Float64:
		return jen.Qual("math", "Float64bits").Call(jen.Float64().Call(x)).Op("==").Qual("math", "Float64bits").Call(jen.Float64().Call(y))
	case k == model.Bytes && key:
		return jen.Qual("bytes", "Equal").Call(x, y)
	case k == model.Bytes:
		return jen.Parens(jen.Add(x).Op("==").Nil()).Op("==").Parens(jen.Add(y).Op("==").Nil()).Op("&&").Qual("bytes", "Equal").Call(x, y)
	case k == model.Time:
		return jen.Qual("time", "Time").Call(x).Dot("Equal").Call(jen.Qual("time", "Time").Call(y))
	}
	return jen.Add(x).Op("==").Add(y)
}

func (e *emitter) equalFn(t *model.Type, key bool) {
	b := t.Base()
	a, bb := jen.Id("a"), jen.Id("b")
	notEq := func(x, y jen.Code, et *model.Type) jen.Code {
		return jen.If(jen.Op("!").Parens(e.equalExpr(et, x, y, key))).Block(jen.Return(jen.False()))
	}
	var body []jen.Code
	switch b.Kind {
	case model.Struct:
		for _, f := range b.Fields {
			body = append(body, notEq(a.Clone().Dot(f.Name), bb.Clone().Dot(f.Name), f.Type))
		}
	case model.Array:
		body = append(body, jen.For(jen.Id("i").Op(":=").Range().Id("a")).Block(
			notEq(a.Clone().Index(jen.Id("i")), bb.Clone().Index(jen.Id("i")), b.Elem)))
	case model.Slice, model.Map:
		body = append(body, jen.If(
			jen.Parens(jen.Op("*").Id("a").Op("==").Nil()).Op("!=").Parens(jen.Op("*").Id("b").Op("==").Nil()).
				Op("||").Len(jen.Op("*").Id("a")).Op("!=").Len(jen.Op("*").Id("b"))).Block(jen.Return(jen.False())))
		if b.Kind == model.Slice {
			body = append(body, jen.For(jen.Id("i").Op(":=").Range().Op("*").Id("a")).Block(
				notEq(jen.Parens(jen.Op("*").Id("a")).Index(jen.Id("i")), jen.Parens(jen.Op("*").Id("b")).Index(jen.Id("i")), b.Elem)))
		} else {
			body = append(body, jen.For(jen.List(jen.Id("k"), jen.Id("xa")).Op(":=").Range().Op("*").Id("a")).Block(
				jen.List(jen.Id("xb"), jen.Id("ok")).Op(":=").Parens(jen.Op("*").Id("b")).Index(jen.Id("k")),
				jen.If(jen.Op("!").Id("ok")).Block(jen.Return(jen.False())),
				notEq(jen.Id("xa"), jen.Id("xb"), b.Elem)))
		}
	case model.Pointer:
		body = append(body,
			jen.If(jen.Op("*").Id("a").Op("==").Nil().Op("||").Op("*").Id("b").Op("==").Nil()).Block(
				jen.Return(jen.Op("*").Id("a").Op("==").Op("*").Id("b"))),
			jen.Return(e.equalExpr(b.Elem, jen.Op("*").Op("*").Id("a"), jen.Op("*").Op("*").Id("b"), key)))
	}
	if b.Kind != model.Pointer {
		body = append(body, jen.Return(jen.True()))
	}
	name := "Equal"
	if key {
		name = "KeyEqual"
	}
	e.f.Func().Id(e.fn(name, t)).Params(jen.List(jen.Id("a"), jen.Id("b")).Op("*").Add(e.typ(t))).Bool().Block(body...)
	e.f.Line()
}

// compareExpr returns the logical comparison of the addressable x and y.
func (e *emitter) compareExpr(t *model.Type, x, y jen.Code) jen.Code {
	if !t.IsLeaf() {
		return jen.Id(e.fn("Compare", t)).Call(jen.Op("&").Add(x), jen.Op("&").Add(y))
	}
	switch t.Base().Kind {
	case model.Bool:
		return jen.Id(reservedPrefix+"CompareBool").Call(jen.Bool().Call(x), jen.Bool().Call(y))
	case model.Bytes:
		return jen.Qual("bytes", "Compare").Call(x, y)
	case model.Time:
		return jen.Id(reservedPrefix+"CompareTime").Call(jen.Qual("time", "Time").Call(x), jen.Qual("time", "Time").Call(y))
	}
	return jen.Qual("cmp", "Compare").Call(x, y)
}

func (e *emitter) compareFn(t *model.Type) {
	b := t.Base()
	a, bb := jen.Id("a"), jen.Id("b")
	step := func(x, y jen.Code, et *model.Type) jen.Code {
		return jen.If(jen.Id("c").Op(":=").Add(e.compareExpr(et, x, y)), jen.Id("c").Op("!=").Lit(0)).Block(jen.Return(jen.Id("c")))
	}
	var body []jen.Code
	switch b.Kind {
	case model.Struct:
		for _, f := range b.Fields {
			body = append(body, step(a.Clone().Dot(f.Name), bb.Clone().Dot(f.Name), f.Type))
		}
	case model.Array:
		body = append(body, jen.For(jen.Id("i").Op(":=").Range().Id("a")).Block(
			step(a.Clone().Index(jen.Id("i")), bb.Clone().Index(jen.Id("i")), b.Elem)))
	}
	body = append(body, jen.Return(jen.Lit(0)))
	e.f.Comment(e.fn("Compare", t) + " is the logical order of keys: by fields in declaration order.")
	e.f.Func().Id(e.fn("Compare", t)).Params(jen.List(jen.Id("a"), jen.Id("b")).Op("*").Add(e.typ(t))).Int().Block(body...)
	e.f.Line()
}

// randValue returns the statement that sets the variable v of type t to a
// random value.
func (e *emitter) randValue(t *model.Type, v string) jen.Code {
	return e.randInto(t, jen.Id(v), jen.Lit(0), jen.True())
}

func (e *emitter) checkValue(c *codec) jen.Code {
	t := c.t
	m := e.names[t.ID()]
	check, fuzz, seed := reservedPrefix+"CheckV"+m, reservedPrefix+"FuzzV"+m, reservedPrefix+"SeedV"+m
	cv := jen.Id("c")
	decl := jen.Var().Id("c").Id(c.name)
	e.f.Comment(check + " round-trips random values through " + c.name + ".")
	// A composite codec also decodes into the value of the previous
	// round, reusing its memory (DecodeValueInto).
	var into, intoCheck []jen.Code
	if !t.IsLeaf() {
		into = []jen.Code{
			jen.If(jen.List(jen.Id("rest"), jen.Err()).Op(":=").Add(cv).Dot("DecodeValueInto").Call(jen.Op("&").Id("into"), jen.Id("buf")),
				jen.Err().Op("!=").Nil().Op("||").Len(jen.Id("rest")).Op("!=").Lit(1)).Block(
				tT.Clone().Dot("Fatalf").Call(jen.Lit("value %d: %#v: decoding %x into the previous value: rest %x, %v"), jen.Id("i"), jen.Id("v"), jen.Id("b"), jen.Id("rest"), jen.Err())),
		}
		intoCheck = []jen.Code{
			jen.If(jen.Op("!").Parens(e.equalExpr(t, jen.Id("v"), jen.Id("into"), false))).Block(
				tT.Clone().Dot("Fatalf").Call(jen.Lit("value %d: decoding into the previous value changed %#v into %#v"), jen.Id("i"), jen.Id("v"), jen.Id("into"))),
		}
	}
	loop := []jen.Code{
		jen.Var().Id("v").Add(e.typ(t)),
		e.randValue(t, "v"),
		jen.Id("b").Op(":=").Add(cv).Dot("AppendValue").Call(jen.Nil(), jen.Id("v")),
		jen.Id("buf").Op(":=").Append(jen.Qual("bytes", "Clone").Call(jen.Id("b")), jen.Lit(0xee)),
		jen.List(jen.Id("got"), jen.Id("rest"), jen.Err()).Op(":=").Add(cv).Dot("DecodeValue").Call(jen.Id("buf")),
		jen.If(jen.Err().Op("!=").Nil()).Block(
			tT.Clone().Dot("Fatalf").Call(jen.Lit("value %d: %#v: decoding %x: %v"), jen.Id("i"), jen.Id("v"), jen.Id("b"), jen.Err())),
		jen.If(jen.Len(jen.Id("rest")).Op("!=").Lit(1).Op("||").Id("rest").Index(jen.Lit(0)).Op("!=").Lit(0xee)).Block(
			tT.Clone().Dot("Fatalf").Call(jen.Lit("value %d: %#v: rest is %x, want ee"), jen.Id("i"), jen.Id("v"), jen.Id("rest"))),
	}
	loop = append(loop, into...)
	loop = append(loop,
		jen.Comment("A decoded value owns its memory: clobbering the input changes nothing."),
		jen.For(jen.Id("j").Op(":=").Range().Id("buf")).Block(jen.Id("buf").Index(jen.Id("j")).Op("=").Lit(0xff)),
		jen.If(jen.Op("!").Parens(e.equalExpr(t, jen.Id("v"), jen.Id("got"), false))).Block(
			tT.Clone().Dot("Fatalf").Call(jen.Lit("value %d: round trip changed %#v into %#v"), jen.Id("i"), jen.Id("v"), jen.Id("got"))),
	)
	loop = append(loop, intoCheck...)
	head := []jen.Code{decl}
	if !t.IsLeaf() {
		head = append(head, jen.Var().Id("into").Add(e.typ(t)))
	}
	e.f.Func().Id(check).Params(jen.Id("t").Op("*").Qual("testing", "T"), jen.Id("r").Add(randT)).Block(append(head,
		jen.For(jen.Id("i").Op(":=").Range().Lit(300)).Block(append(loop,
			jen.Comment("Encodings are self-delimiting: no proper prefix decodes."),
			jen.For(jen.Id("n").Op(":=").Range().Len(jen.Id("b"))).Block(
				jen.If(jen.List(jen.Id("_"), jen.Id("_"), jen.Err()).Op(":=").Add(cv).Dot("DecodeValue").Call(jen.Id("b").Index(jen.Empty(), jen.Id("n"))), jen.Err().Op("==").Nil()).Block(
					tT.Clone().Dot("Fatalf").Call(jen.Lit("value %d: the %d-byte prefix of %x decoded"), jen.Id("i"), jen.Id("n"), jen.Id("b")))))...))...,
	)
	e.f.Line()
	e.f.Comment(fuzz + " decodes arbitrary bytes with " + c.name + "; what decodes must survive a round trip.")
	e.f.Func().Id(fuzz).Params(jen.Id("data").Index().Byte()).Params(jen.Int(), jen.Error()).Block(
		decl,
		jen.List(jen.Id("v"), jen.Id("_"), jen.Err()).Op(":=").Add(cv).Dot("DecodeValue").Call(jen.Id("data")),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Lit(0), jen.Nil())),
		jen.Id("b").Op(":=").Add(cv).Dot("AppendValue").Call(jen.Nil(), jen.Id("v")),
		jen.List(jen.Id("w"), jen.Id("rest"), jen.Err()).Op(":=").Add(cv).Dot("DecodeValue").Call(jen.Id("b")),
		jen.If(jen.Err().Op("!=").Nil().Op("||").Len(jen.Id("rest")).Op("!=").Lit(0)).Block(
			jen.Return(jen.Lit(1), jen.Qual("fmt", "Errorf").Call(jen.Lit("%#v re-encodes as %x, which does not decode: %v"), jen.Id("v"), jen.Id("b"), jen.Err()))),
		jen.If(jen.Op("!").Parens(e.equalExpr(t, jen.Id("v"), jen.Id("w"), false))).Block(
			jen.Return(jen.Lit(1), jen.Qual("fmt", "Errorf").Call(jen.Lit("%#v decodes from its re-encoding as %#v"), jen.Id("v"), jen.Id("w")))),
		jen.Return(jen.Lit(1), jen.Nil()),
	)
	e.f.Line()
	e.f.Func().Id(seed).Params(jen.Id("r").Add(randT)).Index().Byte().Block(
		jen.Var().Id("v").Add(e.typ(t)),
		e.randValue(t, "v"),
		jen.Return(jen.Id(c.name).Values().Dot("AppendValue").Call(jen.Nil(), jen.Id("v"))),
	)
	e.f.Line()
	return jen.Line().Values(jen.Lit(c.name+"/value"), jen.Id(check), jen.Id(fuzz), jen.Id(seed))
}

func (e *emitter) checkKey(c *codec) jen.Code {
	t := c.t
	m := e.names[t.ID()]
	check, fuzz, seed := reservedPrefix+"CheckK"+m, reservedPrefix+"FuzzK"+m, reservedPrefix+"SeedK"+m
	cv := jen.Id("c")
	decl := jen.Var().Id("c").Id(c.name)
	e.comment(check + " round-trips random keys through " + c.name + " and checks\nthat their encodings order like the keys.")
	e.f.Func().Id(check).Params(jen.Id("t").Op("*").Qual("testing", "T"), jen.Id("r").Add(randT)).Block(
		decl,
		jen.For(jen.Id("i").Op(":=").Range().Lit(300)).Block(
			jen.Var().List(jen.Id("x"), jen.Id("y")).Add(e.typ(t)),
			e.randValue(t, "x"),
			e.randValue(t, "y"),
			jen.If(jen.Id("r").Dot("IntN").Call(jen.Lit(8)).Op("==").Lit(0)).Block(jen.Id("y").Op("=").Id("x")),
			jen.List(jen.Id("bx"), jen.Id("by")).Op(":=").List(cv.Clone().Dot("AppendKey").Call(jen.Nil(), jen.Id("x")), cv.Clone().Dot("AppendKey").Call(jen.Nil(), jen.Id("y"))),
			jen.List(jen.Id("got"), jen.Id("rest"), jen.Err()).Op(":=").Add(cv).Dot("DecodeKey").Call(jen.Append(jen.Qual("bytes", "Clone").Call(jen.Id("bx")), jen.Lit(0xee))),
			jen.If(jen.Err().Op("!=").Nil()).Block(
				tT.Clone().Dot("Fatalf").Call(jen.Lit("key %d: %#v: decoding %x: %v"), jen.Id("i"), jen.Id("x"), jen.Id("bx"), jen.Err())),
			jen.If(jen.Len(jen.Id("rest")).Op("!=").Lit(1).Op("||").Op("!").Parens(e.equalExpr(t, jen.Id("x"), jen.Id("got"), true))).Block(
				tT.Clone().Dot("Fatalf").Call(jen.Lit("key %d: round trip changed %#v into %#v (rest %x)"), jen.Id("i"), jen.Id("x"), jen.Id("got"), jen.Id("rest"))),
			jen.List(jen.Id("want"), jen.Id("have")).Op(":=").List(e.compareExpr(t, jen.Id("x"), jen.Id("y")), jen.Qual("bytes", "Compare").Call(jen.Id("bx"), jen.Id("by"))),
			jen.If(jen.Id(reservedPrefix+"Sign").Call(jen.Id("want")).Op("!=").Id("have")).Block(
				tT.Clone().Dot("Fatalf").Call(jen.Lit("key %d: %#v vs %#v compare %d, but their encodings %x and %x compare %d"),
					jen.Id("i"), jen.Id("x"), jen.Id("y"), jen.Id("want"), jen.Id("bx"), jen.Id("by"), jen.Id("have"))),
			jen.For(jen.Id("n").Op(":=").Range().Len(jen.Id("bx"))).Block(
				jen.If(jen.List(jen.Id("_"), jen.Id("_"), jen.Err()).Op(":=").Add(cv).Dot("DecodeKey").Call(jen.Id("bx").Index(jen.Empty(), jen.Id("n"))), jen.Err().Op("==").Nil()).Block(
					tT.Clone().Dot("Fatalf").Call(jen.Lit("key %d: the %d-byte prefix of %x decoded"), jen.Id("i"), jen.Id("n"), jen.Id("bx")))),
			e.checkKeyWord(t, cv),
		),
	)
	e.f.Line()
	e.comment(fuzz + " decodes up to two keys, one after the other, from arbitrary\nbytes with " + c.name + ": each must re-encode to the bytes it was decoded from\n(key encodings are canonical) and decode alike without the bytes that\nfollow it, and the two encodings must compare like the keys.")
	e.f.Func().Id(fuzz).Params(jen.Id("data").Index().Byte()).Params(jen.Int(), jen.Error()).Block(
		decl,
		jen.Var().Id("keys").Index(jen.Lit(2)).Add(e.typ(t)),
		jen.Var().Id("encs").Index(jen.Lit(2)).Index().Byte(),
		jen.Id("rest").Op(":=").Id("data"),
		jen.For(jen.Id("n").Op(":=").Range().Lit(2)).Block(
			jen.List(jen.Id("v"), jen.Id("after"), jen.Err()).Op(":=").Add(cv).Dot("DecodeKey").Call(jen.Id("rest")),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Id("n"), jen.Nil())),
			jen.Id("enc").Op(":=").Id("rest").Index(jen.Empty(), jen.Len(jen.Id("rest")).Op("-").Len(jen.Id("after"))),
			jen.If(jen.Id("b").Op(":=").Add(cv).Dot("AppendKey").Call(jen.Nil(), jen.Id("v")), jen.Op("!").Qual("bytes", "Equal").Call(jen.Id("b"), jen.Id("enc"))).Block(
				jen.Return(jen.Id("n"), jen.Qual("fmt", "Errorf").Call(jen.Lit("key %x decodes as %#v, which encodes as %x"), jen.Id("enc"), jen.Id("v"), jen.Id("b")))),
			jen.If(jen.List(jen.Id("w"), jen.Id("tail"), jen.Err()).Op(":=").Add(cv).Dot("DecodeKey").Call(jen.Id("enc")),
				jen.Err().Op("!=").Nil().Op("||").Len(jen.Id("tail")).Op("!=").Lit(0).Op("||").Op("!").Parens(e.equalExpr(t, jen.Id("v"), jen.Id("w"), true))).Block(
				jen.Return(jen.Id("n"), jen.Qual("fmt", "Errorf").Call(jen.Lit("key %x decodes as %#v followed by more bytes, but alone as %#v, rest %x, %v"), jen.Id("enc"), jen.Id("v"), jen.Id("w"), jen.Id("tail"), jen.Err()))),
			jen.List(jen.Id("keys").Index(jen.Id("n")), jen.Id("encs").Index(jen.Id("n")), jen.Id("rest")).Op("=").List(jen.Id("v"), jen.Id("enc"), jen.Id("after")),
		),
		jen.List(jen.Id("want"), jen.Id("have")).Op(":=").List(e.compareExpr(t, jen.Id("keys").Index(jen.Lit(0)), jen.Id("keys").Index(jen.Lit(1))), jen.Qual("bytes", "Compare").Call(jen.Id("encs").Index(jen.Lit(0)), jen.Id("encs").Index(jen.Lit(1)))),
		jen.If(jen.Id(reservedPrefix+"Sign").Call(jen.Id("want")).Op("!=").Id("have")).Block(
			jen.Return(jen.Lit(2), jen.Qual("fmt", "Errorf").Call(jen.Lit("keys %#v and %#v compare %d, but their encodings %x and %x compare %d"),
				jen.Id("keys").Index(jen.Lit(0)), jen.Id("keys").Index(jen.Lit(1)), jen.Id("want"), jen.Id("encs").Index(jen.Lit(0)), jen.Id("encs").Index(jen.Lit(1)), jen.Id("have")))),
		jen.Return(jen.Lit(2), jen.Nil()),
	)
	e.f.Line()
	e.f.Func().Id(seed).Params(jen.Id("r").Add(randT)).Index().Byte().Block(
		jen.Var().Id("v").Add(e.typ(t)),
		e.randValue(t, "v"),
		jen.Return(jen.Id(c.name).Values().Dot("AppendKey").Call(jen.Nil(), jen.Id("v"))),
	)
	e.f.Line()
	return jen.Line().Values(jen.Lit(c.name+"/key"), jen.Id(check), jen.Id(fuzz), jen.Id(seed))
}

// checkKeyWord is checkKey's test of the codec's KeyWord, if it has one:
// the word of x is x's encoding read as a big-endian number.
func (e *emitter) checkKeyWord(t *model.Type, cv jen.Code) jen.Code {
	if keyWordCodec(t) == "" {
		return jen.Null()
	}
	return jen.If(jen.Id("w").Op(":=").Add(cv).Dot("KeyWord").Call(jen.Id("x")),
		jen.Len(jen.Id("bx")).Op("!=").Lit(8).Op("||").Qual("encoding/binary", "BigEndian").Dot("Uint64").Call(jen.Id("bx")).Op("!=").Id("w")).Block(
		tT.Clone().Dot("Fatalf").Call(jen.Lit("key %d: %#v: KeyWord %#x, but its encoding is %x"), jen.Id("i"), jen.Id("x"), jen.Id("w"), jen.Id("bx")))
}

// tests emits the test functions.
func (e *emitter) tests() {
	e.comment("TestStategenCodecs checks every generated codec of the package on random\nvalues: round trips, no aliasing of the input, rejection of truncated\ninput and, for key codecs, order preservation.")
	e.f.Func().Id("TestStategenCodecs").Params(jen.Id("t").Op("*").Qual("testing", "T")).Block(
		jen.For(jen.List(jen.Id("i"), jen.Id("c")).Op(":=").Range().Id(reservedPrefix + "CodecTests")).Block(
			jen.Id("t").Dot("Run").Call(jen.Id("c").Dot("name"), jen.Func().Params(jen.Id("t").Op("*").Qual("testing", "T")).Block(
				jen.Id("c").Dot("check").Call(jen.Id("t"), jen.Qual("math/rand/v2", "New").Call(jen.Qual("math/rand/v2", "NewPCG").Call(jen.Uint64().Call(jen.Id("i")), jen.Lit(0x5747e6e7)))),
			)),
		),
	)
	e.f.Line()
	e.comment("FuzzStategenDecode feeds arbitrary bytes to every generated decoder (the\nfirst byte picks the codec): decoders must not panic, must allocate at\nmost a small multiple of their input, what they decode must survive a\nround trip, and two keys decoded one after the other must compare like\ntheir encodings. Its seeds are one and two encodings of random values.")
	e.f.Func().Id("FuzzStategenDecode").Params(jen.Id("f").Op("*").Qual("testing", "F")).Block(
		jen.Id("r").Op(":=").Qual("math/rand/v2", "New").Call(jen.Qual("math/rand/v2", "NewPCG").Call(jen.Lit(1), jen.Lit(2))),
		jen.For(jen.List(jen.Id("i"), jen.Id("c")).Op(":=").Range().Id(reservedPrefix+"CodecTests")).Block(
			jen.Id("one").Op(":=").Append(jen.Index().Byte().Values(jen.Byte().Call(jen.Id("i"))), jen.Id("c").Dot("seed").Call(jen.Id("r")).Op("...")),
			jen.Id("f").Dot("Add").Call(jen.Id("one")),
			jen.Id("f").Dot("Add").Call(jen.Append(jen.Id("one"), jen.Id("c").Dot("seed").Call(jen.Id("r")).Op("..."))),
		),
		jen.Id("f").Dot("Fuzz").Call(jen.Func().Params(jen.Id("t").Op("*").Qual("testing", "T"), jen.Id("data").Index().Byte()).Block(
			jen.If(jen.Len(jen.Id("data")).Op("==").Lit(0)).Block(jen.Return()),
			jen.Id("c").Op(":=").Id(reservedPrefix+"CodecTests").Index(jen.Int().Call(jen.Id("data").Index(jen.Lit(0))).Op("%").Len(jen.Id(reservedPrefix+"CodecTests"))),
			jen.Var().Err().Error(),
			jen.Id("fuzz").Op(":=").Func().Params().Block(jen.List(jen.Id("_"), jen.Err()).Op("=").Id("c").Dot("fuzz").Call(jen.Id("data").Index(jen.Lit(1), jen.Empty()))),
			jen.Id("n").Op(":=").Id(reservedPrefix+"Allocated").Call(jen.Id("fuzz")),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Id("t").Dot("Fatalf").Call(jen.Lit("%s: %v"), jen.Id("c").Dot("name"), jen.Err())),
			jen.Comment("A few decodes and encodes of at most len(data) bytes each. The cheap"),
			jen.Comment("count of runtime/metrics is span-grained; an excess is confirmed by"),
			jen.Comment("runtime.ReadMemStats, which is exact but stops the world."),
			jen.Id("limit").Op(":=").Lit(64).Op("*").Uint64().Call(jen.Len(jen.Id("data"))).Op("+").Lit(1<<16),
			jen.If(jen.Id("n").Op(">").Id("limit")).Block(
				jen.Var().List(jen.Id("before"), jen.Id("after")).Qual("runtime", "MemStats"),
				jen.Qual("runtime", "ReadMemStats").Call(jen.Op("&").Id("before")),
				jen.Id("fuzz").Call(),
				jen.Qual("runtime", "ReadMemStats").Call(jen.Op("&").Id("after")),
				jen.If(jen.Id("n").Op("=").Id("after").Dot("TotalAlloc").Op("-").Id("before").Dot("TotalAlloc"), jen.Id("n").Op(">").Id("limit")).Block(
					jen.Id("t").Dot("Fatalf").Call(jen.Lit("%s: %d input bytes made the decoder allocate %d bytes"), jen.Id("c").Dot("name"), jen.Len(jen.Id("data")), jen.Id("n"))),
			),
		)),
	)
	e.f.Line()
}

func (e *emitter) testHelpers() {
	r := jen.Id("r").Add(randT)
	e.f.Comment(reservedPrefix + "Allocated returns the bytes of heap that f allocates, per runtime/metrics.")
	e.f.Func().Id(reservedPrefix+"Allocated").Params(jen.Id("f").Func().Params()).Uint64().Block(
		jen.Id("s").Op(":=").Index().Qual("runtime/metrics", "Sample").Values(jen.Values(jen.Id("Name").Op(":").Lit("/gc/heap/allocs:bytes"))),
		jen.Qual("runtime/metrics", "Read").Call(jen.Id("s")),
		jen.Id("before").Op(":=").Id("s").Index(jen.Lit(0)).Dot("Value").Dot("Uint64").Call(),
		jen.Id("f").Call(),
		jen.Qual("runtime/metrics", "Read").Call(jen.Id("s")),
		jen.Return(jen.Id("s").Index(jen.Lit(0)).Dot("Value").Dot("Uint64").Call().Op("-").Id("before")))
	e.f.Line()
	e.f.Comment(reservedPrefix + "RandBits returns random bits of a random width, so that varints of every length occur.")
	e.f.Func().Id(reservedPrefix + "RandBits").Params(r).Uint64().Block(
		jen.Return(jen.Id("r").Dot("Uint64").Call().Op(">>").Id("r").Dot("UintN").Call(jen.Lit(65))))
	e.f.Line()
	e.f.Comment(reservedPrefix + "RandFloat returns a random float, often a special one; NaN only if nan.")
	e.f.Func().Id(reservedPrefix+"RandFloat").Params(r, jen.Id("nan").Bool()).Float64().Block(
		jen.Switch(jen.Id("r").Dot("IntN").Call(jen.Lit(8))).Block(
			jen.Case(jen.Lit(0)).Block(
				jen.Id("special").Op(":=").Index().Float64().Values(jen.Lit(0), jen.Qual("math", "Copysign").Call(jen.Lit(0), jen.Lit(-1)), jen.Qual("math", "Inf").Call(jen.Lit(1)), jen.Qual("math", "Inf").Call(jen.Lit(-1)), jen.Qual("math", "MaxFloat64"), jen.Qual("math", "SmallestNonzeroFloat64")),
				jen.Return(jen.Id("special").Index(jen.Id("r").Dot("IntN").Call(jen.Len(jen.Id("special")))))),
			jen.Case(jen.Lit(1)).Block(
				jen.If(jen.Id("nan")).Block(jen.Return(jen.Qual("math", "NaN").Call())),
				jen.Return(jen.Lit(1))),
		),
		jen.Return(jen.Parens(jen.Id("r").Dot("Float64").Call().Op("-").Lit(0.5)).Op("*").Qual("math", "Pow").Call(jen.Lit(10), jen.Float64().Call(jen.Id("r").Dot("IntN").Call(jen.Lit(20)).Op("-").Lit(10)))))
	e.f.Line()
	e.comment(reservedPrefix + "RandString returns a short random string over an alphabet that has a NUL\nbyte (escaped in keys), invalid UTF-8 and a multi-byte rune.")
	e.f.Func().Id(reservedPrefix+"RandString").Params(r).String().Block(
		jen.Const().Id("alphabet").Op("=").Lit("ab\x00\xffz\u00e9"),
		jen.Id("b").Op(":=").Make(jen.Index().Byte(), jen.Id("r").Dot("IntN").Call(jen.Lit(6))),
		jen.For(jen.Id("i").Op(":=").Range().Id("b")).Block(jen.Id("b").Index(jen.Id("i")).Op("=").Id("alphabet").Index(jen.Id("r").Dot("IntN").Call(jen.Len(jen.Id("alphabet"))))),
		jen.Return(jen.String().Call(jen.Id("b"))))
	e.f.Line()
	e.f.Comment(reservedPrefix + "RandBytes returns nil, empty or random bytes.")
	e.f.Func().Id(reservedPrefix+"RandBytes").Params(r).Index().Byte().Block(
		jen.Switch(jen.Id("r").Dot("IntN").Call(jen.Lit(4))).Block(
			jen.Case(jen.Lit(0)).Block(jen.Return(jen.Nil())),
			jen.Case(jen.Lit(1)).Block(jen.Return(jen.Index().Byte().Values()))),
		jen.Return(jen.Index().Byte().Call(jen.Id(reservedPrefix+"RandString").Call(jen.Id("r")))))
	e.f.Line()
	e.f.Comment(reservedPrefix + "RandTime returns a random UTC time within about a thousand years of 1970.")
	e.f.Func().Id(reservedPrefix+"RandTime").Params(r).Qual("time", "Time").Block(
		jen.Return(jen.Qual("time", "Unix").Call(jen.Id("r").Dot("Int64N").Call(jen.Lit(1<<36)).Op("-").Lit(1<<35), jen.Id("r").Dot("Int64N").Call(jen.Lit(1e9))).Dot("UTC").Call()))
	e.f.Line()
	e.f.Func().Id(reservedPrefix+"CompareBool").Params(jen.List(jen.Id("a"), jen.Id("b")).Bool()).Int().Block(
		jen.Switch().Block(
			jen.Case(jen.Id("a").Op("==").Id("b")).Block(jen.Return(jen.Lit(0))),
			jen.Case(jen.Id("a")).Block(jen.Return(jen.Lit(1)))),
		jen.Return(jen.Lit(-1)))
	e.f.Line()
	e.comment(reservedPrefix + "CompareTime is the order of time keys: by Unix seconds, then nanoseconds.\nIt is chronological but for the times below time.Unix(math.MinInt64, 0),\nwhose seconds wrap (see runtime.AppendTimeKey); decoding arbitrary bytes\nmakes them, random times do not.")
	e.f.Func().Id(reservedPrefix + "CompareTime").Params(jen.List(jen.Id("a"), jen.Id("b")).Qual("time", "Time")).Int().Block(
		jen.Return(jen.Qual("cmp", "Or").Call(
			jen.Qual("cmp", "Compare").Call(jen.Id("a").Dot("Unix").Call(), jen.Id("b").Dot("Unix").Call()),
			jen.Qual("cmp", "Compare").Call(jen.Id("a").Dot("Nanosecond").Call(), jen.Id("b").Dot("Nanosecond").Call()))))
	e.f.Line()
	e.f.Func().Id(reservedPrefix + "Sign").Params(jen.Id("c").Int()).Int().Block(
		jen.Return(jen.Id("min").Call(jen.Lit(1), jen.Id("max").Call(jen.Lit(-1), jen.Id("c")))))
}
