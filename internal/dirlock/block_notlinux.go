//go:build !linux

package dirlock

import "time"

// blockingWatch and blockPool exist on Linux only (see block_linux.go).
type blockingWatch struct{}

type blockPool struct{}

func (p *Protocol) newBlockingWatch(path string) *blockingWatch { return nil }

func (b *blockingWatch) wait(d time.Duration) bool { return false }

func (b *blockingWatch) close() {}
