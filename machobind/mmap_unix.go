//go:build unix

package machobind

import (
	"fmt"
	"os"
	"syscall"
)

// mapFile maps a whole file read-only.
func mapFile(path string) ([]byte, func() error, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s: not a regular file", path)
	}
	if st.Size() == 0 {
		return nil, nil, fmt.Errorf("%s: empty file", path)
	}
	if int64(int(st.Size())) != st.Size() {
		return nil, nil, fmt.Errorf("%s: too large to map", path)
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}
