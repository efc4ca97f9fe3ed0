/*
 * The kernel semaphore (lock.Semaphore over internal/flock), as
 * internal/flock/slots.go implements it: the gate P, the count file
 * P.slots ("N TOKEN"), the slot files P.slotK, a plain (exclusive) holder
 * of P, a slot taken by hand (`flock -s P flock P.slotK cmd`, docs/cli.md),
 * N changing, crashes, and the files removed or replaced under their
 * holders. model/model_test.go runs SPIN on it (see docs/architecture.md).
 *
 * Every step names the function of the code it stands for, as a file
 * and a function joined by a colon; TestModelNamesExist fails when one no longer exists.
 *
 * Left out, and why:
 *   - The fair queue in front of the slots (internal/fairq, joined by
 *     internal/flock/slots.go:acquireSlot): its stall rule lets a waiter
 *     pass a stopped first waiter, so it guarantees no exclusion and the
 *     safety below must hold without it. Leaving it out lets every
 *     interleaving the queue would forbid happen, which only adds
 *     behaviours: a property that holds here holds with the queue.
 *   - Shared instants on slot files (the parked waits' grants and the
 *     probes of internal/flock/slots.go:heldExclusively): they make a try
 *     see a slot busy for an instant (internal/flock/slots.go:takeFree
 *     tries again) but never make anyone a holder. A slot is modelled as
 *     free or held exclusively.
 *   - The try (no wait): it takes the same steps and gives up where a wait
 *     would block, a subset of the waits' behaviours.
 *   - The loss watch (internal/flock/flock.go:Check) is asynchronous (once a
 *     second); the model does not make a holder let go when told, it only
 *     checks exclusion among the holders whose files are still current.
 *   - Slot files are never removed (a removed slot file is a lock file
 *     removed under its holder, the plain protocol's loss), and all MAXK of
 *     them exist, so every scan sees every one.
 *   - The verified cache (internal/flock/verified.go) lets a plain holder
 *     skip internal/flock/slots.go:orphanedSlots for an inode it judged
 *     before; with P replaced at most once no inode comes back to the
 *     path, so the cache changes nothing here and is left out.
 *
 * Sizes: two acquirers of hold's (NA and NB slots), one plain acquirer,
 * one hand-taken slot (slot HK, MAXK = 3 slot files), one crash of any
 * one process at any step, P replaced at most once and P.slots removed at
 * most once, at any time. Each acquirer acquires once. Every defect known
 * needs at most two slot holders and one other party (the mutants below),
 * and every property compares two holders at a time, so a third acquirer
 * of hold's would add interleavings of the same pairs.
 *
 * Mutants (selected with -DMUTANT=k, each one change):
 *   1  the token floor read in checkCount, before the wait for a slot,
 *      and used in assignToken without reading the count file again (the
 *      defect of issue 53 item 3)
 *   2  a plain holder's token from P's record only, not the count file's
 *   3  setCount looking only at the slots below max(recorded N, asked N)
 *   4  assignToken without checking N again
 */

#ifndef NA
#define NA 2
#endif
#ifndef NB
#define NB 2
#endif
#ifndef MUTANT
#define MUTANT 0
#endif
#ifndef NOCRASHX
#define NOCRASHX
#endif
#define MAXK 3
#define HK 2    /* the slot a user takes by hand */
#define NPROC 5 /* pids 1..4 */

#define SA 1    /* slot acquirer with NA */
#define SB 2    /* slot acquirer with NB */
#define PL 3    /* plain acquirer */
#define HD 4    /* hand-taken slot */

#define max2(a, b) ((a) > (b) -> (a) : (b))

/* The gate P: two inodes (the first, and the file that replaces it). */
byte pcur;             /* the inode the path P names */
byte gX[2];            /* exclusive holder (pid), 0 for none */
byte gS[2];            /* shared holders */
byte gT[2];            /* token in the inode's owner record */

/* The count file P.slots: two inodes (removed once: a new empty file). */
byte ccur;
byte cX[2];            /* exclusive holder (pid) */
byte cN[2];            /* N recorded, 0 for none */
byte cT[2];            /* token recorded */

/* Slot files. */
byte sX[MAXK];         /* exclusive holder (pid) */
byte sT[MAXK];         /* token in the slot's owner record */
/* ghost: kept[p*MAXK+k]: slot k was held when p's setCount began its
 * scan, and has not been let go since */
bool kept[NPROC*MAXK];

/* What each process holds, for its crash (the kernel frees it all). */
byte myGate[NPROC];    /* inode+1 of P held (shared or exclusive) */
byte myCount[NPROC];   /* inode+1 of P.slots locked exclusively */
byte mySlot[NPROC];    /* slot+1 held exclusively */

/* Ghosts: holders, as the caller sees them. */
bool holds[NPROC];     /* returned to the caller, not released yet */
byte holdN[NPROC];     /* N of a slot holder of hold's */
byte holdC[NPROC];     /* its count file's inode */
byte holdG[NPROC];     /* its gate's inode */
byte tok[NPROC];       /* its token */
byte lastTok;          /* the last token handed out (made durable) */
bool crashed;          /* one crash in all */
bool preplaced;        /* P was replaced */
bool cremoved;         /* P.slots was removed */
bool crash[NPROC];

/* Kernel locks. */
inline lockShared(g)   { atomic { gX[g] == 0 -> gS[g]++; myGate[me] = g + 1 } }
inline lockExcl(g)     { atomic { gX[g] == 0 && gS[g] == 0 -> gX[g] = me; myGate[me] = g + 1 } }
inline unlockGate()    { atomic { if :: gX[myGate[me]-1] == me -> gX[myGate[me]-1] = 0 :: else -> gS[myGate[me]-1]-- fi; myGate[me] = 0 } }
inline lockCnt(c)      { atomic { cX[c] == 0 -> cX[c] = me; myCount[me] = c + 1 } }
inline unlockCnt()     { atomic { cX[myCount[me]-1] = 0; myCount[me] = 0 } }
inline unlockSlot()    { atomic { sX[mySlot[me]-1] = 0; kept[SA*MAXK+mySlot[me]-1] = false; kept[SB*MAXK+mySlot[me]-1] = false; mySlot[me] = 0 } }

/* A crash: the kernel frees every lock of the process; files keep what
 * was written. The caller no longer holds anything. */
inline crashCleanup() {
	atomic {
		if :: mySlot[me] != 0 -> unlockSlot() :: else fi;
		if :: myCount[me] != 0 -> unlockCnt() :: else fi;
		if :: myGate[me] != 0 -> unlockGate() :: else fi;
		holds[me] = false
	}
}

/* A token is handed out: it is durable (the next acquisition reads it)
 * from this step on. Tokens rise strictly in this order, unless P was
 * replaced: the tokens of plain holders live in P's record, and a lock
 * file made anew starts them again (docs/cli.md says so of every kernel
 * lock). */
inline assigned(t, exempt) {
	assert(t > lastTok || preplaced || exempt);
	lastTok = t
}

/* The caller is told it holds, with token t. */
inline granted(t) {
	atomic {
		tok[me] = t;
		holds[me] = true
	}
}

/* internal/flock/slots.go:acquireSlot, one acquisition with n slots. */
proctype Slot(byte me; byte n) {
	byte g, c, k, t, inUse, fence, i, attempt, floor;
	bool held;
	{
	skip;
again:
	/* internal/flock/slots.go:lockGate: open P, lock it shared (a plain
	 * holder is waited for), and start again if P no longer names it
	 * (internal/flock/sys_unix.go:namedBy; the look is one stat). */
	g = pcur;
	lockShared(g);
	if
	:: g != pcur -> unlockGate(); goto again
	:: else
	fi;

	/* internal/flock/slots.go:checkCount */
check:
	/* internal/flock/slots.go:lockCountFile: open, lock exclusively, and
	 * open again if P.slots was removed or replaced meanwhile. */
	c = ccur;
	lockCnt(c);
	if
	:: c != ccur -> unlockCnt(); goto check
	:: else
	fi;
	/* internal/flock/slots.go:readCount */
	atomic { inUse = cN[c]; fence = cT[c] }
	if
	:: inUse == n -> unlockCnt()
	:: else ->
		/* internal/flock/slots.go:setCount: the token floor from the
		 * gate's record (internal/flock/record.go:fenceAt), then every
		 * slot file, each looked at in a step of its own
		 * (internal/flock/slots.go:heldExclusively,
		 * internal/flock/slots.go:fenceIn). */
		atomic {
			fence = max2(fence, gT[pcur]);
			/* ghost: the slots held as the scan begins */
			kept[me*MAXK+0] = (sX[0] != 0);
			kept[me*MAXK+1] = (sX[1] != 0);
			kept[me*MAXK+2] = (sX[2] != 0)
		}
		held = false;
		i = 0;
		do
#if MUTANT == 3
		:: i < max2(inUse, n) ->
#else
		:: i < MAXK ->
#endif
			atomic {
				fence = max2(fence, sT[i]);
				if
				:: sX[i] != 0 -> held = true
				:: else
				fi
			};
			if
			:: held -> break
			:: else -> i++
			fi
		:: else -> break
		od;
		if
		:: !held ->
			/* internal/flock/slots.go:writeCount. N does not change
			 * under a slot that was held all through the scan. */
			atomic {
				assert(n == inUse || !(kept[me*MAXK+0] || kept[me*MAXK+1] || kept[me*MAXK+2]));
				cN[c] = n;
				cT[c] = fence
			}
		:: else
		fi;
		unlockCnt();
		if
		:: held && inUse > 0 ->
			/* ErrSlotCount (internal/flock/slots.go:slotCountError) */
			unlockGate(); goto done
		:: held ->
			/* No N recorded while a slot is held: P.slots was removed
			 * under its holders, who are told (the loss watch). Wait
			 * (countPoll) and look again; the look finds the same
			 * until that slot is let go or the count file changes,
			 * so the model waits for either. */
			atomic {
				(sX[i] == 0 || ccur != c || cN[c] != 0);
				i = 0; held = false; inUse = 0; fence = 0
			}
			goto check
		:: else
		fi
	fi;
	atomic {
		floor = fence;
		i = 0; held = false; inUse = 0; fence = 0
	}

	/* internal/flock/slots.go:takeSlot: a free slot, each tried in turn
	 * or the first that any wait is granted
	 * (internal/flock/slots.go:waitAnySlot): which one is the
	 * scheduler's choice. */
	atomic {
		if
		:: n > 0 && sX[0] == 0 -> k = 0
		:: n > 1 && sX[1] == 0 -> k = 1
		:: n > 2 && sX[2] == 0 -> k = 2
		fi;
		sX[k] = me; mySlot[me] = k + 1
	}

	/* internal/flock/slots.go:assignToken */
	lockCnt(c);
	if
	:: c != ccur || g != pcur ->
		/* P.slots or P replaced since: errCountChanged */
		goto changed
	:: else
	fi;
	inUse = cN[c];
#if MUTANT != 4
	if
	:: inUse != n -> goto changed
	:: else
	fi;
#endif
#if MUTANT == 1
	/* The old defect: the floor read in checkCount, before the wait. */
	fence = floor;
#else
	fence = cT[c];
#endif
	/* internal/flock/record.go:publishLocked, the slot's record:
	 * one above the count file's, the gate's and the slot's own. */
	atomic {
		t = max2(max2(fence, gT[g]), sT[k]) + 1;
		sT[k] = t
	}
	/* internal/flock/slots.go:writeCount */
	atomic {
		cT[c] = t;
		assigned(t, false)
	}
	unlockCnt();
	atomic {
		holdN[me] = n; holdC[me] = c; holdG[me] = g;
		granted(t)
	}

	/* Held. internal/flock/slots.go:Release: the slot, then P. */
	atomic { holds[me] = false; unlockSlot() }
	unlockGate();
	goto done

changed:
	unlockSlot();
	unlockCnt();
	unlockGate();
	attempt++;
	if
	:: attempt < 3 -> goto again
	:: else /* ErrSlotCount */
	fi;
done:
	skip
	} unless { crash[me] -> crashCleanup() }
}

/* internal/flock/flock.go:acquire, a plain (exclusive) lock of P. */
proctype Plain(byte me) {
	byte g, t, last, i;
	bool orphan;
	{
	skip;
again:
	/* internal/flock/flock.go:take, internal/flock/flock.go:lockOpened:
	 * open, lock exclusively (waiting), start again on a replaced file. */
	g = pcur;
	lockExcl(g);
	if
	:: g != pcur -> unlockGate(); goto again
	:: else
	fi;
	/* internal/flock/record.go:judge -> internal/flock/slots.go:orphanedSlots:
	 * a slot held now is held under a P this file replaced. */
	orphan = false;
	i = 0;
	do
	:: i < MAXK ->
		if
		:: sX[i] != 0 -> orphan = true; break
		:: else -> i++
		fi
	:: else -> break
	od;
	if
	:: orphan ->
		/* internal/flock/slots.go:orphanError: let go, wait, again */
		unlockGate(); goto again
	:: else
	fi;
	/* internal/flock/record.go:publishLocked: one above P's record and
	 * the count file's token (internal/flock/slots.go:readCountAt,
	 * read without its lock: no slot holder can be writing it). */
	atomic {
		last = gT[g];
#if MUTANT != 2
		last = max2(last, cT[ccur]);
		/* internal/flock/slots.go:slotsFence: nothing recorded (a new
		 * P, or P.slots made anew): the slot files keep their holders'
		 * last tokens, and the sequence goes on above them. */
		if
		:: last == 0 ->
			i = 0;
			do
			:: i < MAXK -> last = max2(last, sT[i]); i++
			:: else -> break
			od
		:: else
		fi;
#endif
		t = last + 1;
		gT[g] = t;
		assigned(t, false)
	}
	atomic {
		holdG[me] = g;
		granted(t)
	}
	/* internal/flock/flock.go:Release */
	atomic { holds[me] = false; unlockGate() }
	} unless { crash[me] -> crashCleanup() }
}

/* `flock -s P flock P.slotHK cmd` (docs/cli.md): P shared, then the
 * slot exclusively; no count file, no token, no look at the path. */
proctype Hand(byte me) {
	byte g;
	{
	g = pcur;
	lockShared(g);
	atomic { sX[HK] == 0 -> sX[HK] = me; mySlot[me] = HK + 1 };
	atomic { holdG[me] = g; holds[me] = true };
	atomic { holds[me] = false; unlockSlot() };
	unlockGate()
	} unless { crash[me] -> crashCleanup() }
}

/* The properties that hold in every state. */
#define slotHolder(p) (holds[p] && (p == SA || p == SB))
#define agree (!(slotHolder(SA) && slotHolder(SB)) || holdN[SA] == holdN[SB])
#define atMostN (!(slotHolder(SA) && slotHolder(SB)) || holdN[SA] >= 2)
/* N recorded, while its count file is current, is every holder's N. */
#define countIs(p) (!slotHolder(p) || holdC[p] != ccur || cN[ccur] == holdN[p])
/* No plain holder whose P is current beside a slot holder of hold's (any
 * gate: orphanedSlots waits for those under a replaced P), nor beside a
 * hand-taken slot under the current P. */
#define plainAlone (!(holds[PL] && holdG[PL] == pcur) || \
	(!slotHolder(SA) && !slotHolder(SB) && !(holds[HD] && holdG[HD] == pcur)))

/* Tokens are unique among the holders whose files are all current (a
 * holder whose P or P.slots was replaced is told it lost the lock). */
#define current(p) (holds[p] && holdG[p] == pcur && (p == PL || holdC[p] == ccur))
#define differ(p, q) (!(current(p) && current(q)) || tok[p] != tok[q])
#define unique (differ(SA, SB) && differ(SA, PL) && differ(SB, PL))

active proctype Monitor() {
end:	atomic { !(agree && atMostN && countIs(SA) && countIs(SB) && plainAlone && unique) -> assert(false) }
}

/* Faults: one crash of any process at any step; P replaced by a new file
 * (old holders keep the old inode) once; P.slots removed (a new, empty
 * file) once. */
active proctype Faults() {
end:
	do
	:: NOCRASHX !crashed -> atomic { crashed = true; if :: crash[SA] = true :: crash[SB] = true :: crash[PL] = true :: crash[HD] = true fi }
#ifndef NOREPLACE
	:: !preplaced -> preplaced = true; pcur = 1
#endif
#ifndef NOREMOVE
	:: !cremoved -> cremoved = true; ccur = 1
#endif
	od
}

init {
	atomic {
		run Slot(SA, NA);
#if NB > 0
		run Slot(SB, NB);
#endif
#ifdef PLAIN
		run Plain(PL);
#endif
#ifdef HAND
		run Hand(HD)
#endif
	}
}
