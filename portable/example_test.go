package portable_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/portable"
)

// Choose the portable protocol once and pass it to hold's functions with
// WithProtocol: the lock is the directory "<target>.lock", which Node's
// proper-lockfile sees too.
func Example() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	target := filepath.Join(dir, "pipeline.md")

	p := portable.New(portable.StaleAfter(30 * time.Second)) // create once, reuse
	err := hold.Do(context.Background(), target, func(ctx context.Context) error {
		fi, err := os.Stat(target + ".lock")
		fmt.Println("lock is a directory:", err == nil && fi.IsDir())
		return nil // ctx is cancelled if the lock is lost while this runs
	}, hold.WithProtocol(p))
	fmt.Println(err)
	// Output:
	// lock is a directory: true
	// <nil>
}

// Patience fails a wait on a lock that one holder keeps, while a lock that
// keeps changing hands is waited for.
func ExamplePatience() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	target := filepath.Join(dir, "pipeline.md")

	p := portable.New(portable.Patience(50 * time.Millisecond))
	l, err := hold.TryAcquire(target, hold.WithProtocol(p))
	if err != nil {
		panic(err)
	}
	defer l.Release()
	_, err = hold.Acquire(context.Background(), target, hold.WithProtocol(p))
	fmt.Println(errors.Is(err, hold.ErrTimeout))
	// Output: true
}
