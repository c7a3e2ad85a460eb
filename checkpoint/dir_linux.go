package checkpoint

import (
	"os"
	"syscall"
)

// startWriteback asks the kernel to start writing n bytes of f at off back
// to disk, without waiting. It is a hint: errors are ignored, and the fsync
// of Commit is what makes the data durable.
func startWriteback(f *os.File, off, n int64) {
	const syncFileRangeWrite = 0x2 // SYNC_FILE_RANGE_WRITE
	_ = syscall.SyncFileRange(int(f.Fd()), off, n, syncFileRangeWrite)
}
