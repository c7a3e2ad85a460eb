package checkpoint

// SetReadAhead sets how many blocks v's Scans read ahead of their callback
// (0: none), so that the external tests compare both ways of reading.
func SetReadAhead(v *View, blocks int) { v.readAhead = blocks }
