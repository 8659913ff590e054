//go:build !linux && !darwin

package cli

// isTerminal reports false: progress is shown on Linux and macOS only.
func isTerminal(uintptr) bool { return false }
