// Command gohello is the Go-built darwin fixture: Go's own linker, its own import style.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Println("hello from", os.Args[0])
}
