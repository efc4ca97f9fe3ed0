package robust

import (
	"testing"
	"time"
)

// Small hand-made histories, each with one defect or one excused case: the
// checker must name the defect and only it.

const sec = int64(time.Second)

func sectionRecs(op, pid int, mode string, n, slot int, token uint64, enter, exit int64) []Record {
	base := Record{Op: op, Pid: pid, Mode: mode, N: n, Slot: slot, Token: token, Target: logTarget, Client: clientRun, Proto: "kernel"}
	e, x := base, base
	e.Ev, e.T = "enter", enter
	x.Ev, x.T = "exit", exit
	c := Record{Op: op, Ev: "client", T: enter - 1, End: exit + 1, Pid: pid + 1000, Slot: -1, Target: logTarget}
	return []Record{e, x, c}
}

func runOps(n int) []Op {
	ops := make([]Op, n)
	for i := range ops {
		ops[i] = Op{ID: i, Client: clientRun, Target: logTarget, Mode: modeExcl, Proto: "kernel"}
	}
	return ops
}

func kinds(v *Verdict) map[string]int {
	m := map[string]int{}
	for _, f := range v.Failures {
		m[f.Kind]++
	}
	return m
}

func TestCheckerJudges(t *testing.T) {
	cat := func(rs ...[]Record) []Record {
		var out []Record
		for _, r := range rs {
			out = append(out, r...)
		}
		return out
	}
	cases := []struct {
		name    string
		recs    []Record
		want    map[string]int
		excused int
	}{
		{"sound", cat(
			sectionRecs(0, 1, modeExcl, 0, 0, 1, 1*sec, 2*sec),
			sectionRecs(1, 2, modeSlot, 2, 0, 2, 3*sec, 5*sec),
			sectionRecs(2, 3, modeSlot, 2, 1, 3, 4*sec, 6*sec),
			sectionRecs(3, 4, modeShared, 0, 0, 3, 4*sec, 6*sec),
			sectionRecs(4, 5, modeExcl, 0, 0, 4, 7*sec, 8*sec),
		), map[string]int{}, 0},
		{"plain beside slot", cat(
			sectionRecs(0, 1, modeSlot, 2, 0, 1, 1*sec, 3*sec),
			sectionRecs(1, 2, modeExcl, 0, 0, 2, 2*sec, 4*sec),
		), map[string]int{"overlap": 1}, 0},
		{"more than N", cat(
			sectionRecs(0, 1, modeSlot, 2, 0, 1, 1*sec, 5*sec),
			sectionRecs(1, 2, modeSlot, 2, 1, 2, 2*sec, 5*sec),
			sectionRecs(2, 3, modeSlot, 2, 2, 3, 3*sec, 5*sec),
		), map[string]int{"slots": 1}, 0},
		{"token backwards", cat(
			sectionRecs(0, 1, modeSlot, 2, 0, 5, 1*sec, 2*sec),
			sectionRecs(1, 2, modeExcl, 0, 0, 3, 3*sec, 4*sec),
		), map[string]int{"token": 1}, 0},
		{"slot token twice", cat(
			sectionRecs(0, 1, modeSlot, 2, 0, 3, 1*sec, 3*sec),
			sectionRecs(1, 2, modeSlot, 2, 1, 3, 2*sec, 4*sec),
		), map[string]int{"token": 1}, 0},
		{"removed file, holder told", cat(
			sectionRecs(0, 1, modeExcl, 0, 0, 1, 1*sec, 3*sec),
			sectionRecs(1, 2, modeExcl, 0, 0, 1, 2*sec+sec/2, 4*sec),
			[]Record{{Op: -1, Ev: "fault", Note: faultRemove, Target: logTarget, File: logTarget + ".lock", T: 2 * sec}},
		), map[string]int{}, 2},
		{"removed file, holder never told", cat(
			sectionRecs(0, 1, modeSlot, 2, 0, 1, 1*sec, 9*sec),
			sectionRecs(1, 2, modeExcl, 0, 0, 2, 2*sec+sec/2, 4*sec),
			[]Record{{Op: -1, Ev: "fault", Note: faultRemove, Target: logTarget, File: logTarget + ".lock", T: 2 * sec}},
		), map[string]int{"overlap": 1, "untold": 1}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A told holder's term record.
			if c.excused > 0 {
				c.recs = append(c.recs, Record{Op: 0, Ev: "term", Pid: 1, T: 3 * sec, Target: logTarget, Mode: modeExcl})
			}
			v := Check(History{Records: c.recs, Ops: runOps(5), Log: nil, Counter: []byte(`{"count":0,"last":-1}`)})
			got := kinds(v)
			for k, n := range c.want {
				if got[k] != n {
					t.Errorf("%s: %d failures, want %d: %v", k, got[k], n, v.Failures)
				}
			}
			for k, n := range got {
				if c.want[k] == 0 {
					t.Errorf("unexpected %d %s failures: %v", n, k, v.Failures)
				}
			}
			if len(v.Excused) < c.excused || (c.excused == 0 && len(v.Excused) > 0) {
				t.Errorf("%d excused, want %d: %v", len(v.Excused), c.excused, v.Excused)
			}
		})
	}
}

func TestCheckerLostUpdate(t *testing.T) {
	ops := []Op{{ID: 0, Client: clientUpdate, Target: counterTarget, Mode: modeExcl}, {ID: 1, Client: clientUpdate, Target: counterTarget, Mode: modeExcl}}
	recs := []Record{
		{Op: 0, Ev: "enter", Pid: 1, T: 1 * sec, Target: counterTarget, Mode: modeSlot, N: 2, Slot: 0, Old: 0, OldLast: -1},
		{Op: 0, Ev: "exit", Pid: 1, T: 2 * sec, Target: counterTarget, Mode: modeSlot, N: 2, Slot: 0},
		{Op: 1, Ev: "enter", Pid: 2, T: 1 * sec, Target: counterTarget, Mode: modeSlot, N: 2, Slot: 1, Old: 0, OldLast: -1},
		{Op: 1, Ev: "exit", Pid: 2, T: 2 * sec, Target: counterTarget, Mode: modeSlot, N: 2, Slot: 1},
		{Op: 0, Ev: "client", Pid: 11, T: 0, End: 3 * sec, Slot: -1},
		{Op: 1, Ev: "client", Pid: 12, T: 0, End: 3 * sec, Slot: -1},
	}
	v := Check(History{Records: recs, Ops: ops, Counter: []byte(`{"count":1,"last":1}`)})
	if kinds(v)["lost-update"] == 0 {
		t.Fatalf("two updates that read 0 and one write: no lost update found: %v", v.Failures)
	}
}
