//go:build !linux

package msgtrace

import "github.com/msgtrace/msgtrace/machobind"

// platformRebindings: dyld reports images loaded later itself, so nothing beyond the
// interposers is rebound.
func platformRebindings() []machobind.Rebinding { return nil }

// SetExitHook: on darwin, exit handlers are enough for now; _exit is not interposed.
func SetExitHook(f func()) {}
