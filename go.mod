module github.com/msgtrace/msgtrace

go 1.26.8

require (
	github.com/blacktop/go-macho v1.1.296
	github.com/ebitengine/purego v0.11.3
	github.com/google/pprof v0.0.0-20261016150608-1facf8f91b50
	google.golang.org/protobuf v1.36.10
)

require github.com/blacktop/go-dwarf v1.1.0 // indirect
