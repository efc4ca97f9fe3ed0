/*
 * The portable protocol (internal/dirlock, docs/portable.md), directory
 * form: the claim by mkdir, the owner record, the read-back, judging
 * staleness, the reclaim under the guard directory, and the release that
 * removes only its own lock (moved aside, checked, put back otherwise).
 * model/model_test.go runs SPIN on it (see docs/architecture.md).
 *
 * Every step names the function of the code it stands for, as a file and
 * a function joined by a colon; TestModelNamesExist fails when one no
 * longer exists.
 *
 * Left out, and why:
 *   - Time. Staleness by age is abstracted to the one case that needs no
 *     clock: a holder is stale once it is dead
 *     (internal/dirlock/judge.go:judgeAfter: a dead pid is stale at once;
 *     a live one on this host never). A live holder misjudged stale by
 *     age (another host, a clock skew, a holder stopped longer than
 *     Stale) is outside: the protocol's answer to it is the holder's own
 *     expiry (internal/dirlock/expiry.go) and the heartbeat, which tells
 *     it of the loss, not exclusion. A directory without a record is live
 *     while its maker lives (it is younger than Grace), stale once it has
 *     died or withdrawn its record (internal/dirlock/dirlock.go:pass: a
 *     claim that lost its directory takes its record back, and the
 *     directory, if put back, ages out).
 *   - The guard's eviction by age (internal/dirlock/dirlock.go:takeGuard)
 *     is modelled for a dead guard holder only, for the same reason.
 *   - The file form (internal/dirlock/softfile.go) and a kernel holder of
 *     the same file (internal/dirlock/dirlock.go:reclaimFile): its claim
 *     step and its kernel lock are not modelled here.
 *   - The waiting gate (internal/dirlock/gate.go) orders waiters; safety
 *     never rests on it.
 *   - The heartbeat (internal/dirlock/handle.go:beat) only tells a holder
 *     of a loss; it removes nothing, and is left out.
 *
 * Sizes: three processes, each acquiring once and releasing; one crash of
 * any one at any step (a crash frees nothing: there are no kernel locks
 * here); with -DHANDRM, the lock directory removed by hand once, at any
 * time. A reclaim race needs a dead holder and two reclaimers, a release
 * race a holder and a successor: three processes hold every such pair
 * with the dead one.
 *
 * Mutants (-DMUTANT=k):
 *   1  reclaim by stat-compare-then-delete, without the guard: the
 *      directory at the path is deleted if it is the one judged, with no
 *      move aside, so a successor's lock made between the compare and the
 *      delete is deleted
 *   2  release without the identity check: what is moved aside is deleted
 *      unchecked
 */

#ifndef MUTANT
#define MUTANT 0
#endif
#define NP 4      /* pids 1..3 */
#define MAXD 12   /* directories ever made */

byte cur;               /* the directory at the lock path, 0 for none */
byte nd;                /* directories made so far */
byte maker[MAXD];       /* its maker's pid */
bool stamped[MAXD];     /* owner record written */
bool withdrawn[MAXD];   /* its maker took its record back (lost race) */
byte guard;             /* pid holding the guard directory, 0 for none */
bool dead[NP];          /* crashed */
byte holding[NP];       /* the directory p holds, confirmed by read-back */
bool crashed, handrm;
bool crash[NP];

/* Whether a holder's lock is at the path, or was taken by a fault. */
#define intact(p) (holding[p] == 0 || dead[p] || cur == holding[p] || handrm)
/* At most one live holder whose lock is at the path; and no live
 * holder's lock leaves the path but by its own release or a fault. */
#define one (!(holding[1] != 0 && holding[2] != 0 && !dead[1] && !dead[2]) || handrm)
#define exclusive (one && \
	(!(holding[1] != 0 && holding[3] != 0 && !dead[1] && !dead[3]) || handrm) && \
	(!(holding[2] != 0 && holding[3] != 0 && !dead[2] && !dead[3]) || handrm))

active proctype Monitor() {
end:	atomic { !(exclusive && intact(1) && intact(2) && intact(3)) -> assert(false) }
}

/* A lock directory is deleted: the one the remover meant (judged, or its
 * own), unless the put-back lost a race (putBack). */
inline deleted(d, meant) {
	assert(d == meant)
}

/* internal/dirlock/dirlock.go:acquire, once, then
 * internal/dirlock/handle.go:Release. */
proctype Waiter(byte me) {
	byte mine, j, moved, tries;
	bool stale;
	{
	skip;
again:
	tries++;
	if
	:: tries > 4 -> goto done /* bounded: a wait that ends (ctx) */
	:: else
	fi;
	/* internal/dirlock/dirlock.go:claimDir: mkdir */
	atomic {
		if
		:: cur == 0 && nd < MAXD - 1 -> nd++; cur = nd; maker[nd] = me; mine = nd
		:: else -> mine = 0
		fi
	}
	if
	:: mine != 0 ->
		/* createOwner: the record, written into our directory through
		 * its descriptor (even when it was moved away meanwhile) */
		stamped[mine] = true;
		/* internal/dirlock/dirlock.go:confirm -> check: the path is
		 * our directory with our record */
		if
		:: cur == mine -> holding[me] = mine
		:: else ->
			/* d.withdrawOwner: unstamped, the directory ages out
			 * like any ownerless lock, whoever made it */
			withdrawn[mine] = true; mine = 0; goto again
		fi
	:: else ->
		/* internal/dirlock/dirlock.go:contended: judge without the guard
		 * (internal/dirlock/judge.go:judgeAfter) */
		atomic {
			j = cur;
			stale = (j != 0 && (dead[maker[j]] || withdrawn[j]))
		}
		if
		:: j == 0 -> goto again /* vanished */
		:: j != 0 && !stale ->
			/* live: wait until the path changes (or ends) */
			atomic { (cur != j || dead[maker[j]] || withdrawn[j]); j = 0 };
			goto again
		:: else
		fi;
#if MUTANT == 1
		/* The mutant: compare, then delete what the path names. */
		atomic {
			if
			:: cur == j -> skip
			:: else -> j = 0; goto again
			fi
		}
		atomic {
			if
			:: cur != 0 -> moved = cur; cur = 0; deleted(moved, j)
			:: else
			fi
		}
		j = 0; moved = 0;
		goto again;
#endif
		/* internal/dirlock/dirlock.go:takeGuard: mkdir the guard; one
		 * left by a dead reclaimer is cleared (by age) */
		atomic {
			if
			:: guard == 0 -> guard = me
			:: guard != 0 && dead[guard] -> guard = me
			:: else -> j = 0; goto again /* busy: judge again later */
			fi
		}
		/* judge again under the guard: this judgement licenses the
		 * delete */
		atomic {
			j = cur;
			stale = (j != 0 && (dead[maker[j]] || withdrawn[j]))
		}
		if
		:: !stale -> goto dropGuard
		:: else
		fi;
		/* internal/dirlock/remove.go:removeIfSame: move aside, check
		 * what was moved, delete it or put it back */
		atomic {
			moved = cur; cur = 0
		}
		if
		:: moved == 0 -> skip /* vanished: changed */
		:: moved == j -> deleted(moved, j)
		:: else ->
			/* internal/dirlock/remove.go:putBack, or the tomb deleted
			 * when the path was taken again meanwhile */
			atomic { if :: cur == 0 -> cur = moved :: else fi }
		fi;
dropGuard:
		/* internal/dirlock/dirlock.go:dropGuard */
		atomic { if :: guard == me -> guard = 0 :: else fi; j = 0; moved = 0; stale = false }
		goto again
	fi;

	/* Held. internal/dirlock/handle.go:Release: identity first. */
#if MUTANT != 2
	if
	:: cur != mine -> holding[me] = 0; goto done /* lost */
	:: else
	fi;
#endif
	/* internal/dirlock/remove.go:removeIfSame (from the move on, the
	 * caller no longer counts as holding: it is letting go) */
	atomic {
		moved = cur; cur = 0; holding[me] = 0
	}
	if
	:: moved == 0 -> holding[me] = 0 /* changed: lost */
#if MUTANT == 2
	:: else -> atomic { holding[me] = 0; deleted(moved, mine) }
#else
	:: moved == mine -> atomic { holding[me] = 0; deleted(moved, mine) }
	:: moved != 0 && moved != mine ->
		atomic { if :: cur == 0 -> cur = moved :: else fi; holding[me] = 0 }
#endif
	fi;
done:
	skip
	} unless { atomic { crash[me] -> dead[me] = true } }
}

/* Faults: one crash of any process at any step; with HANDRM the lock
 * directory removed by hand once. */
active proctype Faults() {
end:
	do
	:: !crashed -> atomic { crashed = true; if :: crash[1] = true :: crash[2] = true :: crash[3] = true fi }
#ifdef HANDRM
	:: !handrm && cur != 0 -> atomic { handrm = true; cur = 0 }
#endif
	od
}

init {
	atomic {
		run Waiter(1);
		run Waiter(2);
		run Waiter(3)
	}
}
