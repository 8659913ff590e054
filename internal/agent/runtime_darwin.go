package agent

import "github.com/msgtrace/msgtrace/machobind"

// platformRuntime is this process's dynamic linker as the rebinder sees it.
func platformRuntime() (machobind.Runtime, error) { return machobind.DefaultRuntime() }
