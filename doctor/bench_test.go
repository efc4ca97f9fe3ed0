package doctor

import (
	"context"
	"testing"
)

// BenchmarkCheck times a whole doctor run on the test's temporary directory:
// with the second party in this process (Config{}, the default) and as a second
// process (hold doctor, which also starts a third for the exit probe).
// The goal is a run well under a second on a local disk.
func BenchmarkCheck(b *testing.B) {
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"in-process", Config{}},
		{"second-process", Config{NewPeer: processPeer}},
	} {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			for b.Loop() {
				rep, err := Check(context.Background(), dir, c.cfg)
				if err != nil {
					b.Fatal(err)
				}
				if rep.Verdict != Safe {
					b.Fatalf("verdict %s: %s", rep.Verdict, rep.Summary)
				}
			}
		})
	}
}
