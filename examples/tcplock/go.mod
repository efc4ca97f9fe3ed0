module github.com/hold-dev/hold/examples/tcplock

go 1.26.8

require github.com/hold-dev/hold v0.0.0

require (
	github.com/fsnotify/fsnotify v1.10.1 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace github.com/hold-dev/hold => ../..
