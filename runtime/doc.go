// Package runtime holds the contracts every part of stategen is built on:
// key groups, codecs, state specs, the byte-level Store contract that every
// backend implements, and the typed handles that sit on top of it.
package runtime
