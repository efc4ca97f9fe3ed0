package postgres_test

import (
	"context"
	"testing"
	"time"
)

func BenchmarkVariants(b *testing.B) {
	c := rawConn(b)
	ctx := context.Background()
	p := dial(b)
	_ = p
	c.Exec(ctx, `CREATE SEQUENCE IF NOT EXISTS hold_locks_fence; CREATE UNLOGGED TABLE IF NOT EXISTS hold_locks (key bigint PRIMARY KEY, name text NOT NULL, fence bigint NOT NULL, owner text NOT NULL DEFAULT '', backend_pid integer NOT NULL DEFAULT 0)`)
	c.Exec(ctx, `INSERT INTO hold_locks VALUES (42, 'x', 1, '', 0) ON CONFLICT DO NOTHING`)
	owner := `{"pid":1234,"host":"vm","token":"abcdefabcdef","started_at":"2026-11-30T12:00:00Z","command":["a","b"],"released":false,"protocol":"postgres"}`
	vs := []struct{ name, lock string }{
		{"naive", `SELECT pg_advisory_lock($1::bigint)`},
		{"nextval", `SELECT pg_advisory_lock($1::bigint), nextval('hold_locks_fence')`},
		{"upsert", `WITH l AS (SELECT true AS got FROM pg_advisory_lock($1::bigint)),
u AS (INSERT INTO hold_locks AS t (key, name, fence, owner, backend_pid)
	SELECT $1, 'x', nextval('hold_locks_fence'), $2, pg_backend_pid() FROM l WHERE l.got
	ON CONFLICT (key) DO UPDATE SET fence = excluded.fence, owner = excluded.owner, backend_pid = excluded.backend_pid
	WHERE t.name = excluded.name RETURNING t.fence)
SELECT l.got, (SELECT fence FROM u) FROM l`},
		{"insert-flat", `INSERT INTO hold_locks AS t (key, name, fence, owner, backend_pid)
	SELECT $1, 'x', nextval('hold_locks_fence'), $2, pg_backend_pid() FROM pg_advisory_lock($1::bigint)
	ON CONFLICT (key) DO UPDATE SET fence = excluded.fence, owner = excluded.owner, backend_pid = excluded.backend_pid
	WHERE t.name = excluded.name RETURNING t.fence`},
		{"update", `WITH l AS (SELECT true AS got FROM pg_advisory_lock($1::bigint)),
u AS (UPDATE hold_locks AS t SET fence = nextval('hold_locks_fence'), owner = $2, backend_pid = pg_backend_pid()
	FROM l WHERE l.got AND t.key = $1 AND t.name = 'x' RETURNING t.fence)
SELECT l.got, (SELECT fence FROM u) FROM l`},
	}
	totals := make([]time.Duration, len(vs))
	for i := 0; i < b.N; i++ {
		for j, v := range vs {
			start := time.Now()
			var err error
			if v.name == "naive" || v.name == "nextval" {
				_, err = c.Exec(ctx, v.lock, int64(42))
			} else {
				_, err = c.Exec(ctx, v.lock, int64(42), owner)
			}
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Exec(ctx, `SELECT pg_advisory_unlock($1::bigint)`, int64(42)); err != nil {
				b.Fatal(err)
			}
			totals[j] += time.Since(start)
		}
	}
	for j, v := range vs {
		b.ReportMetric(float64(totals[j].Microseconds())/float64(b.N), v.name+"-µs")
	}
}
