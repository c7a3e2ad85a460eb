// Package geo holds types that state in package generated uses from another
// package, including a generic one.
package geo

// Point is a position.
type Point struct {
	Lat, Lon float64
}

// Pair is a generic pair, used instantiated.
type Pair[A, B any] struct {
	First  A
	Second B
}

// Region is a named area: a defined slice type of another package.
type Region []Point
