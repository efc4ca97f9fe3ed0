/*
 * The fair queue (internal/fairq, the Linux form of
 * internal/fairq/ofd_linux.go; the ticket files of
 * internal/fairq/tickets_unix.go keep the same order with one file per
 * ticket): tickets, the wait on the predecessor, the hand-off, the stall
 * rule, a waiter that stops or dies. model/model_test.go runs SPIN on it.
 *
 * Every step names the function of the code it stands for, as a file and
 * a function joined by a colon; TestModelNamesExist fails when one no
 * longer exists.
 *
 * Left out, and why:
 *   - Time: the stall rule passes a predecessor at the front of the queue
 *     once the main lock has stayed free for StallBound; the model lets
 *     it pass whenever the main lock is free with the predecessor at the
 *     front, which allows every pass the rule allows, and more.
 *   - The staged wait (internal/fairq/ofd_linux.go:stagedWait) only
 *     shortens the final wait, and the first wait's shortcut on the
 *     ticket just below; both end in the same search.
 *   - Progress (a free lock taken within bounded steps unless every waiter
 *     is stopped) is not checked: only the safety below.
 *
 * Sizes: three waiters, each joining once; one crash of any at any step
 * (a crash frees its ticket and the main lock: all kernel locks). FIFO
 * needs two waiters and a third that leaves or stalls between them.
 *
 * Properties: one holder of the main lock (the kernel's lock: the queue
 * guards nothing); a waiter takes the main lock only when every waiter
 * with an earlier ticket still queued was passed over by the stall rule.
 *
 * Mutant (-DMUTANT=1): after its predecessor leaves, the waiter takes
 * the lock without looking again below it (the predecessor may have
 * given up or died, with earlier waiters still queued).
 */

#ifndef MUTANT
#define MUTANT 0
#endif
#define NP 4    /* pids 1..3 */
#define MAXT 5  /* tickets 1..3 */

byte next = 1;          /* the queue's counter */
byte tk[MAXT];          /* ticket t is held by pid tk[t], 0 for none */
byte main;              /* holder of the main lock */
byte myT[NP];           /* each waiter's ticket */
bool passed[NP];        /* passed over by the stall rule */
bool crashed;
bool crash[NP];

/* No ticket below t is held: its holder is at the front. */
#define atFront(t) ((t <= 1 || tk[1] == 0) && (t <= 2 || tk[2] == 0) && (t <= 3 || tk[3] == 0))

/* Every waiter queued with a ticket below t was passed over. */
#define earlierPassed(t) \
	((myT[1] == 0 || myT[1] >= t || tk[myT[1]] != 1 || passed[1]) && \
	 (myT[2] == 0 || myT[2] >= t || tk[myT[2]] != 2 || passed[2]) && \
	 (myT[3] == 0 || myT[3] >= t || tk[myT[3]] != 3 || passed[3]))

proctype Waiter(byte me) {
	byte t, below, pred, u;
	{
	skip;
	/* internal/fairq/ofd_linux.go:join: under the counter's lock
	 * (internal/fairq/ofd_linux.go:lockCounter), the next number, and
	 * its ticket locked before the counter is let go */
	atomic { t = next; next++; tk[t] = me; myT[me] = t };
	below = t;
search:
	/* internal/fairq/ofd_linux.go:highestLive: the highest ticket below
	 * that is held */
	atomic {
		pred = 0; u = below;
		do
		:: u > 1 -> u--; if :: tk[u] != 0 -> pred = u; break :: else fi
		:: else -> break
		od;
		u = 0
	}
	if
	:: pred == 0 -> goto head
	:: else
	fi;
	/* internal/fairq/ofd_linux.go:waitFor: until the predecessor's
	 * ticket is let go, or the stall rule passes it over
	 * (internal/fairq/ofd_linux.go:stalled) */
	if
	:: atomic { tk[pred] == 0 -> skip }
	:: atomic { tk[pred] != 0 && atFront(pred) && main == 0 -> passed[tk[pred]] = true }
	fi;
#if MUTANT == 1
	goto head;
#endif
	below = pred;
	goto search;
head:
	/* internal/fairq/fairq.go:acquire: the main lock through the wrapped
	 * protocol, a kernel lock */
	atomic {
		main == 0 -> main = me;
		assert(earlierPassed(t))
	}
	/* leave the queue: the ticket is let go */
	tk[t] = 0;
	/* held; released */
	main = 0
	} unless { atomic { crash[me] -> if :: tk[t] == me -> tk[t] = 0 :: else fi; if :: main == me -> main = 0 :: else fi } }
}

active proctype Faults() {
end:
	do
	:: !crashed -> atomic { crashed = true; if :: crash[1] = true :: crash[2] = true :: crash[3] = true fi }
	od
}

init {
	atomic {
		run Waiter(1);
		run Waiter(2);
		run Waiter(3)
	}
}
