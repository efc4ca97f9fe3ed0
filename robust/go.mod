module github.com/hold-dev/hold/robust

go 1.26.8

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/hold-dev/hold v0.0.0
	golang.org/x/sys v0.50.0
)

require github.com/fsnotify/fsnotify v1.10.1 // indirect

replace github.com/hold-dev/hold => ../
