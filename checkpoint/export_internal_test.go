package checkpoint

// SetReadAhead sets how many blocks v's Scans read ahead of their callback
// (0: none), so that the external tests compare both ways of reading.
func SetReadAhead(v *View, blocks int) { v.readAhead = blocks }

// SetFileTag makes the writer write tag as the file tag instead of a random
// one, so that the external tests pin a file's bytes. Zero restores the
// random tag.
func SetFileTag(o *WriterOptions, tag uint32) { o.tag = tag }
