// Command gen writes the stream format's generated files from internal/streamspec:
// tracer/stream/stream_format.go and stream_format.h (run by `go generate ./tracer/stream`).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/msgtrace/msgtrace/internal/streamspec"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	flag.Parse()
	goFile, err := streamspec.GoFile()
	if err != nil {
		fmt.Fprintln(os.Stderr, "streamspec:", err)
		os.Exit(1)
	}
	for name, b := range map[string][]byte{
		filepath.Join("tracer", "stream", "stream_format.go"): goFile,
		"stream_format.h": streamspec.CHeader(),
	} {
		if err := os.WriteFile(filepath.Join(*root, name), b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "streamspec:", err)
			os.Exit(1)
		}
	}
}
