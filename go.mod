module github.com/msgtrace/msgtrace

go 1.26.8

require (
	github.com/blacktop/go-dwarf v1.1.0 // indirect
	github.com/blacktop/go-macho v1.1.296 // indirect
	github.com/ebitengine/purego v0.11.3 // indirect
)
