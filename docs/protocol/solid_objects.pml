/*
 * solid_objects: the actor protocol (lease, claim, run, fenced commit, stale-claim recovery,
 * dead-process cleanup, graceful release, pause/resume, destroy) as a Promela model for spin.
 *
 * docs/protocol.md explains the protocol, what this model covers and what it abstracts
 * away, and how to run it (tests/model/test_protocol_model.py runs every check below):
 *
 *   safety     spin -a solid_objects.pml
 *              gcc -O2 -DSAFETY -DCOLLAPSE -DMEMLIM=2048 -o pan pan.c && ./pan -m100000
 *   liveness   spin -a -DLIVENESS -DNM=2 solid_objects.pml
 *              gcc -O2 -DNFAIR=3 -DCOLLAPSE -DMEMLIM=2048 -o pan pan.c && ./pan -a -f -m100000
 *   defect 1   spin -a -DOLD_CLEANUP solid_objects.pml ... (spin must report errors: 1)
 *   a trail    spin -t <the same -D flags> solid_objects.pml   (narrates the counterexample)
 *
 * Modelling rules.
 *  - One actor instance (one row in `instances`) and NM messages in its mailbox (enqueued
 *    before the workers start, or, with PRODUCER, concurrently by a producer).
 *  - A transaction that holds the instance row lock for its whole extent is one d_step: every
 *    writer of this instance's lease, ready rows and claimed rows takes that lock, so these
 *    transactions are serialised and nobody sees them half done. A crash inside a transaction
 *    rolls it back, which is the same as a crash just before it.
 *  - Statements that do not hold the lock and read with their own snapshot (PostgreSQL READ
 *    COMMITTED: each statement sees what committed before it started) are separate steps.
 *  - Time is abstract: a lease is fresh or expired. The environment expires, at any moment,
 *    the lease of a holder that stopped renewing it (paused or dead); a live holder renews
 *    its lease (the renewal only extends an unexpired lease carrying its token). Retry
 *    delays are abstracted away (a retried message is due at once).
 *  - Tokens: the real fence compares owner, token and generation; here one "token" value
 *    stands for (token, generation). A new lease takes the smallest value that no lease,
 *    claimed row or worker still holds, which keeps the state space finite while every
 *    comparison the real fence makes gives the same answer.
 *  - Processes: NPROC worker processes of THREADS role threads each. A process may crash
 *    before any transaction, be paused (its heartbeat goes stale: another process's cleanup
 *    may take it for dead while it still runs, and it may try to commit with its old lease
 *    when it wakes up), stop gracefully, and start again under a new process id. At most
 *    MAXF such faults happen in a run, so progress is possible.
 *  - Handlers run outside transactions, may fail (retry, or dead letter at MAX_ATTEMPTS;
 *    at most MAXHF failures in a run) and may run more than once; what must happen at most
 *    once is the COMMIT of a message's state change.
 *
 * Compile-time switches (spin -a -D...):
 *   NM=1..3        messages (default 3)
 *   NPROC=1..3     worker processes (default 2)
 *   THREADS=1|2    role threads per process, sharing its process id (default 1)
 *   MAXA=n         max attempts of a message (default 2)
 *   MAXF=n         faults: crashes, pauses, graceful stops (default 2)
 *   MAXHF=n        handler failures (default 1)
 *   GROUP=1..3     turns per grouped commit (default 2; 1 = one commit per turn)
 *   NO_FAILURES    handlers always succeed
 *   NO_GRACEFUL    no graceful stops
 *   ADMIN_PAUSE    an operator may pause the actor once, and resumes it
 *   PRODUCER       messages are enqueued while the workers run
 *   DESTROY        ref.destroy() may run (safety only: it deletes the mailbox)
 *   LIVENESS       check the LTL property `progress` (with pan -a -f)
 *   OLD_CLEANUP    the dead-process cleanup before the fix of defect 1 (issue 9)
 *   NO_RECHECK     the recovery transactions do not re-check the lease under the row lock
 *   NO_MONITOR     no ready/claimed invariant process
 *   DEFERRED_CLAIM a lease may also be taken without its first claim (a sync caller's
 *                  enqueue on PostgreSQL takes it), the claim following in a second
 *                  statement that re-checks the lease under the row lock
 *   COMMIT_CHECK_ONLY  only the property "no state change commits twice" is asserted
 *   HAND_BACK      a claimed turn not started yet may be handed back (a batch's watchdog,
 *                  another thread of the same process, once a slow turn held it up): under
 *                  the row lock and only while the lease is still ours, the claim goes
 *                  back to ready uncounted and the lease is released; the thread skips the
 *                  turn either way (at most MAXHB=n times in a run, default 1)
 *   BLIND_HAND_BACK  the same without the check of the lease (a broken variant)
 */

/* ---------------------------------------------------------------- parameters */
#ifndef NM
#define NM 3
#endif
#ifndef NPROC
#define NPROC 2
#endif
#ifndef MAXA
#define MAXA 2
#endif
#ifndef MAXF
#define MAXF 2
#endif
#ifndef GROUP
#define GROUP 2
#endif
#ifndef MAXHF
#define MAXHF 1
#endif
#ifndef THREADS
#define THREADS 1
#endif
#ifndef MAXHB
#define MAXHB 1
#endif
#ifdef BLIND_HAND_BACK
#define HAND_BACK
#endif

#if NM > 3 || NM < 1
#error "NM must be 1, 2 or 3"
#endif
#if NPROC > 3 || NPROC < 1
#error "NPROC must be 1, 2 or 3"
#endif
#if GROUP > 3 || GROUP < 1
#error "GROUP must be 1, 2 or 3"
#endif
#if defined(LIVENESS) && defined(DESTROY)
#error "destroy deletes the mailbox: check it with the safety run only"
#endif

#define NP      (NPROC + MAXF)  /* process ids 1..NP; 0 = nobody */
#define NONE    255             /* no message */
#define NW      (NPROC * THREADS) /* worker threads */
#define MAXTOK  (NW + 3)        /* tokens 1..MAXTOK; 0 = no token */
#if THREADS > 2 || THREADS < 1
#error "THREADS must be 1 or 2"
#endif

/* words for the narration of a trail (spin -t) */
mtype = { succeeds, fails };

/* ---------------------------------------------------------------- the database */
byte enq;                      /* messages enqueued so far (sequence = index) */
bit  ready[NM];                /* a row in ready_messages */
byte attempts[NM];             /* messages.attempt_count */
bit  done[NM];                 /* the turn's state change committed (completed_at) */
bit  dead[NM];                 /* a row in dead_letters */

byte claim_msg = NONE;         /* claimed_messages: at most one row per instance (unique) */
byte claim_pid;                /*   its process_id */
byte claim_tok;                /*   its activation_token (and generation) */

byte lease_owner;              /* instances.activation_owner_id */
byte lease_tok;                /* instances.activation_token (and generation) */
bit  lease_exp;                /* activation_expires_at <= now() */
bit  apaused;                  /* instances.paused_at IS NOT NULL */
bit  destroyed;                /* the row was deleted (cascading to the mailbox) */

bit  stale[NP + 1];            /* processes.last_heartbeat_at is older than the threshold */
bit  stopped[NP + 1];          /* processes.shutdown_state = 'stopped' */

/* ---------------------------------------------------------------- the runtime */
byte cur_pid[NPROC];           /* the registration each worker process currently runs under */
byte next_pid = NPROC + 1;     /* the next process id a (re)registration gets */
byte wtok[NW];                 /* the token each worker thread holds for its current pass */
#if THREADS > 1
byte osinc[NPROC];             /* incarnation of each worker OS process (crash, exit: +1) */
#endif
byte faults;                   /* crashes, pauses, graceful stops so far */
byte admin_pauses;             /* pause/resume cycles by an operator so far */
byte hfails;                   /* handler failures so far */
byte handbacks;                /* turns handed back so far (HAND_BACK) */
bit  cl_locked;                /* OLD_CLEANUP only: the cleanup holds the instance row lock */

/* scratch variables of d_steps (hidden: not part of the state) */
hidden byte hi, hj, ht;
hidden byte hused;

/* Consistency checks besides property 1 (COMMIT_CHECK_ONLY keeps only property 1, to get
 * the shortest trail to a double commit in a broken variant). */
#ifdef COMMIT_CHECK_ONLY
#define CHECK(e) skip
#else
#define CHECK(e) assert(e)
#endif

#define IN(set, p)   (((set) >> (p)) & 1)
#define TERMINAL(x)  (done[x] || dead[x])
#define FREE_LOCK    (cl_locked == 0)

/* ---------------------------------------------------------------- statements */

/* A token value nobody holds: a fresh (activation_token, activation_generation + 1). */
inline fresh_token(t) {
    t = 1;
    do
    :: true ->
        hused = (t == lease_tok || t == claim_tok);
        for (hj : 0 .. NW - 1) { hused = hused || (wtok[hj] == t) }
        if
        :: hused -> t++
        :: else -> break
        fi
    od;
    assert(t <= MAXTOK);
    hj = 0; hused = 0
}

inline clear_claim() {
    claim_msg = NONE; claim_pid = 0; claim_tok = 0
}

inline clear_lease() {
    lease_owner = 0; lease_tok = 0; lease_exp = 0
}

/* The fenced commit writes a turn's state change: property 1, it happens at most once. */
inline commit_state(x) {
    assert(done[x] == 0);  /* the state change of message x commits twice */
    CHECK(!dead[x]);      /* a dead-lettered message commits */
    done[x] = 1
}

/* Dead-letter a message (insert into dead_letters, delete its ready/claimed row). */
inline dead_letter(x) {
    CHECK(!done[x] && !dead[x]);  /* a finished message is dead-lettered */
    dead[x] = 1
}

/* claim_next: move the lowest-sequence ready message to claimed, count an attempt. */
inline claim_head(x, fatt) {
    x = NONE;
    for (hi : 0 .. NM - 1) {
        if
        :: x == NONE && ready[hi] -> x = hi
        :: else
        fi
    }
    hi = 0;
    if
    :: x != NONE ->
        CHECK(claim_msg == NONE);  /* the unique index: one claim per actor */
        ready[x] = 0;
        claim_msg = x; claim_pid = me; claim_tok = tok;
        attempts[x]++;
        fatt = attempts[x]
    :: else
    fi
}

/* claim_runnable: claim the next message; one whose attempts were all used by processes that
 * died during its turn is dead-lettered instead, and the next one is claimed. `x` may be a
 * message already claimed by the same transaction. */
inline claim_runnable(x, fatt) {
    do
    :: true ->
        if
        :: x == NONE -> claim_head(x, fatt)
        :: else
        fi;
        if
        :: x == NONE || attempts[x] <= MAXA -> break
        :: else ->
            attempts[x]--;
            dead_letter(x);
            clear_claim();
            x = NONE
        fi
    od
}

/* _recover_stale_claim: the claimed row a dead activation left goes back to ready, or to
 * its dead letter when its attempts are used up. */
inline recover_stale() {
    if
    :: claim_msg != NONE ->
        ht = claim_msg;
        if
        :: attempts[ht] >= MAXA -> dead_letter(ht)
        :: else -> CHECK(!ready[ht]); ready[ht] = 1
        fi;
        clear_claim();
        ht = 0
    :: else
    fi
}

/* release: UPDATE ... SET activation_* = NULL WHERE token = ours AND generation = ours */
inline release() {
    if
    :: lease_tok == tok -> clear_lease()
    :: else
    fi
}

/* The lease statement's WHERE: the row is not locked, the actor is not paused, the lease
 * is free or expired. */
#define LEASABLE (FREE_LOCK && !destroyed && !apaused && (lease_tok == 0 || lease_exp))
/* What candidates() finds: a due ready head, or a claimed row left behind. */
#define ANY_READY (ready[0] || (NM > 1 && ready[1]) || (NM > 2 && ready[2]))
#define CANDIDATE (ANY_READY || claim_msg != NONE)

/* Our lease, checked under the row lock: owner, token, generation, not expired. */
#define OUR_LEASE (lease_owner == me && lease_tok == tok && !lease_exp)

/* The fixed release_owned, for one instance and the process ids in `set`, in one short
 * transaction holding the instance row lock: delete the claimed rows owned by those
 * processes and requeue exactly the rows deleted; clear the lease if one of them owns it. */
inline release_owned(set) {
    if
    :: claim_msg != NONE && IN(set, claim_pid) ->
        CHECK(!ready[claim_msg]);
        ready[claim_msg] = 1;
        clear_claim()
    :: else
    fi;
    if
    :: lease_tok != 0 && IN(set, lease_owner) -> clear_lease()
    :: else
    fi
}

inline new_registration(p) {
    assert(next_pid <= NP);
    cur_pid[p] = next_pid;
    next_pid++
}

/* A crash before the next transaction: the process stops (its heartbeat goes stale for
 * good) and a new process with a new id replaces it. Everything in memory is lost. With
 * THREADS = 2 the other thread of the process dies with it: it notices at its next crash
 * point (until then it acts like a thread of a paused process, which is a behaviour the
 * model has anyway). */
#if THREADS > 1
#define PROCESS_EXITS osinc[ps]++
#define DIED_WITH_PROCESS :: osinc[ps] != myinc -> goto restart
#define SAME_PROCESS (osinc[ps] == myinc)
#else
#define PROCESS_EXITS skip
#define DIED_WITH_PROCESS
#define SAME_PROCESS true
#endif
#define CRASHPOINT \
    if \
    DIED_WITH_PROCESS \
    :: d_step { SAME_PROCESS && faults < MAXF -> faults++; stale[me] = 1; \
                stale[cur_pid[ps]] = 1; PROCESS_EXITS; new_registration(ps); \
                printf("P%d.%d crashes; restarted as P%d\n", me, w, cur_pid[ps]) }; \
       goto restart \
    :: SAME_PROCESS \
    fi

/* ---------------------------------------------------------------- a worker process */
/* Step 1's lease (the thread's process heartbeats first; a row another process's cleanup
 * marked stopped is replaced by a new registration): a fresh token, owner, expiry. */
inline take_lease() {
    /* (a thread of the process running now, under its current registration) */
    me = cur_pid[ps];
#if THREADS > 1
    myinc = osinc[ps];
#endif
    /* the heartbeat before the pass: a row that another process's cleanup marked
     * stopped (it took us for dead during a pause) is replaced by a new one */
    if
    :: stopped[me] ->
        new_registration(ps);
        printf("P%d.%d finds its row stopped; continues as P%d\n", me, w, cur_pid[ps]);
        me = cur_pid[ps]
    :: else -> stale[me] = 0
    fi;
    fresh_token(tok);
    wtok[w] = tok;
    lease_owner = me; lease_tok = tok; lease_exp = 0;
}

proctype Worker(byte ps; byte w)  /* process slot ps, thread w */
{
    byte me;            /* the process id this pass runs under */
#if THREADS > 1
    byte myinc;         /* the incarnation of the OS process this thread belongs to */
#endif
    byte tok;           /* the lease's token (and generation) */
    byte first = NONE;  /* the claimed turn */
    byte fatt;          /* its attempt_count as the claim returned it */
    byte f1 = NONE;     /* read-ahead followers of a group */
    byte f2 = NONE;
    byte nxt = NONE;    /* the turn the commit claimed next */
    bit stalec;         /* the lease found a claimed row left behind */
    bit ok0, ok1, ok2;  /* handler outcomes of the group's turns */
    bit kg;             /* keep going after the commit (claim the next turn) */
    bit committed;      /* the fence passed */
    bit defer;          /* the lease was taken without its first claim */

restart:
    me = cur_pid[ps];
#if THREADS > 1
    myinc = osinc[ps];
#endif
top:
    atomic {
        wtok[w] = 0; tok = 0; first = NONE; fatt = 0; f1 = NONE; f2 = NONE; nxt = NONE;
        stalec = 0; ok0 = 0; ok1 = 0; ok2 = 0; kg = 0; committed = 0; defer = 0
    }
end_idle:
    if
    :: d_step {
           /* ---- 1. lease. candidates() (a plain read) found the actor with a due ready
            * message or a claimed row left behind; one autocommit statement locks it
            * (SKIP LOCKED), takes the lease if it is free or expired (fresh token,
            * generation + 1, database-clock expiry), and claims the head unless a claimed
            * row was left behind. A worker waits here while nothing is leasable.
            * (The MariaDB/SQLite path, lease + recovery + claim in one transaction, is
            * this path with step 2 run at once.) */
           LEASABLE && CANDIDATE ->
           take_lease();
           stalec = (claim_msg != NONE);
           if
           :: !stalec -> claim_head(first, fatt)
           :: else
           fi;
           if
           :: stalec ->
               printf("P%d.%d leases (token %d); finds message %d claimed by P%d\n",
                      me, w, tok, claim_msg, claim_pid)
           :: else ->
               printf("P%d.%d leases (token %d), claims message %d (attempt %d)\n",
                      me, w, tok, first, fatt)
           fi
       }
#ifdef DEFERRED_CLAIM
    :: d_step {
           /* ---- 1'. a sync caller's enqueue (PostgreSQL, one autocommit statement) takes
            * the lease while it is free and claims nothing: the first claim is a second
            * statement (step 2 below), which locks the row while the lease is still ours. */
           LEASABLE && CANDIDATE ->
           take_lease();
           defer = 1;
           printf("P%d.%d leases (token %d) with its enqueue; claims later\n", me, w, tok)
       }
#endif
#ifndef NO_GRACEFUL
    :: d_step {
           /* a graceful stop between passes: deregister (release_owned of our own id),
            * mark the row stopped; the supervisor starts again under a new id */
           faults < MAXF && FREE_LOCK ->
           faults++;
           me = cur_pid[ps];
           printf("P%d.%d: graceful stop; P%d releases what it holds\n", me, w, me);
           ht = 1 << me;
           release_owned(ht);
           ht = 0;
           stopped[me] = 1;
           PROCESS_EXITS;
           new_registration(ps);
           me = cur_pid[ps]
       };
       goto restart
#endif
    fi;
    if
    :: stalec || fatt > MAXA || defer ->
        /* ---- 2. recovery, in a second transaction: (re-check the lease,) move the claim
         * left behind back to ready or to its dead letter, claim the head (a message out of
         * attempts goes to its dead letter instead), release if nothing is due */
        CRASHPOINT;
        d_step {
            FREE_LOCK;
#ifndef NO_RECHECK
            if
            :: OUR_LEASE ->
#endif
                if
                :: defer -> stalec = (claim_msg != NONE)  /* read under the row lock */
                :: else
                fi;
                if
                :: stalec ->
                    printf("P%d.%d recovery (row lock held): puts message %d back\n",
                           me, w, claim_msg);
                    recover_stale()
                :: else
                fi;
                claim_runnable(first, fatt);
                if
                :: first != NONE ->
                    printf("P%d.%d recovery: claims message %d (attempt %d)\n",
                           me, w, first, fatt)
                :: else -> printf("P%d.%d recovery: nothing to claim\n", me, w)
                fi;
                if
                :: first == NONE -> release()
                :: else
                fi
#ifndef NO_RECHECK
            :: else ->
                first = NONE;  /* lost the lease meanwhile: give up, touch nothing */
                printf("P%d.%d recovery: the lease is no longer ours, gives up\n", me, w)
            fi
#endif
        };
        if
        :: first == NONE -> goto top
        :: else
        fi
    :: else
    fi;

turns:
#ifdef HAND_BACK
    if
    :: handbacks < MAXHB ->
        /* ---- 2'. the turn is handed back before it starts (a batch's watchdog, in one
         * transaction of its own): under the row lock, while the lease is still ours, the
         * claimed row goes back to ready, its attempt uncounted, and the lease is
         * released. The batch's thread skips the turn whether or not that succeeded (a
         * lost lease: recovery has the claim). */
        CRASHPOINT;
        d_step {
            FREE_LOCK;
            handbacks++;
            if
#ifndef BLIND_HAND_BACK
            :: OUR_LEASE && claim_msg == first && claim_tok == tok ->
#else
            :: true ->
#endif
                CHECK(!ready[first]);  /* a message is both ready and claimed */
                ready[first] = 1;
                attempts[first]--;
                clear_claim();
                release();
                printf("P%d.%d hands message %d back (uncounted), releases the lease\n",
                       me, w, first)
#ifndef BLIND_HAND_BACK
            :: else ->
                printf("P%d.%d hand-back: the lease is no longer ours, touches nothing\n",
                       me, w)
#endif
            fi
        };
        goto top
    :: true
    fi;
#endif
    /* ---- 3. run: the claimed turn, and (grouped commits) the following ready messages
     * read ahead without moving them, outside any transaction. A turn whose attempt count
     * shows that a process died during it runs alone. */
#if GROUP > 1
    if
    :: fatt <= 1 ->
        d_step {  /* prefetch: a plain read */
            for (hi : 0 .. NM - 1) {
                if
                :: f1 == NONE && hi > first && ready[hi] -> f1 = hi
#if GROUP > 2
                :: f1 != NONE && f2 == NONE && hi > f1 && ready[hi] -> f2 = hi
#endif
                :: else
                fi
            }
            hi = 0;
            if
            :: f1 != NONE -> printf("P%d.%d reads ahead message %d\n", me, w, f1)
            :: else
            fi;
            if
            :: f2 != NONE -> printf("P%d.%d reads ahead message %d\n", me, w, f2)
            :: else
            fi
        }
    :: else
    fi;
#endif
    /* The handlers. A failing turn ends the group; the group then releases the lease. */
    atomic {
#ifdef NO_FAILURES
        ok0 = 1;
        ok1 = (f1 != NONE);
        ok2 = (f2 != NONE);
#else
        /* at most MAXHF handler failures in a run (each one is recorded by the commit) */
        if
        :: ok0 = 1
        :: hfails < MAXHF -> ok0 = 0; hfails++
        fi;
        if
        :: ok0 && f1 != NONE ->
            if
            :: ok1 = 1
            :: hfails < MAXHF -> ok1 = 0; hfails++
            fi
        :: else
        fi;
        if
        :: ok1 && f2 != NONE ->
            if
            :: ok2 = 1
            :: hfails < MAXHF -> ok2 = 0; hfails++
            fi
        :: else
        fi;
#endif
        /* the last turn of the group succeeded: the commit claims the next one, or (budget
         * spent, shutting down) releases the lease */
        if
        :: ok0 && (f1 == NONE || (ok1 && (f2 == NONE || ok2))) ->
            if
            :: kg = 1
            :: kg = 0
            fi
        :: else
        fi;
        printf("P%d.%d runs message %d: it %e\n", me, w, first, (ok0 -> succeeds : fails));
        if
        :: ok0 && f1 != NONE ->
            printf("P%d.%d runs message %d: it %e\n", me, w, f1, (ok1 -> succeeds : fails))
        :: else
        fi;
        if
        :: ok1 && f2 != NONE ->
            printf("P%d.%d runs message %d: it %e\n", me, w, f2, (ok2 -> succeeds : fails))
        :: else
        fi
    }

    /* ---- 4. the fenced commit, one transaction: the UPDATE checks owner, token, generation
     * and the unexpired lease while taking the row lock; the claimed row must still be there
     * with our token; completions and failures are written; the next head is claimed or the
     * lease released. If a check fails nothing is written (LostActivation). */
    CRASHPOINT;
    d_step {
        FREE_LOCK;
        if
        :: OUR_LEASE && claim_msg == first && claim_tok == tok ->
            committed = 1;
            /* the claimed head */
            if
            :: ok0 -> commit_state(first)
            :: else ->
                if
                :: attempts[first] < MAXA ->
                    CHECK(!done[first] && !dead[first] && !ready[first]);
                    ready[first] = 1
                :: else -> dead_letter(first)
                fi
            fi;
            clear_claim();
            /* read-ahead followers: their attempt is counted now */
            if
            :: ok0 && f1 != NONE ->
                CHECK(ready[f1]);  /* read ahead from ready: still there */
                attempts[f1]++;
                if
                :: ok1 -> commit_state(f1); ready[f1] = 0
                :: else ->
                    if
                    :: attempts[f1] >= MAXA -> dead_letter(f1); ready[f1] = 0
                    :: else
                    fi
                fi
            :: else
            fi;
            if
            :: ok1 && f2 != NONE ->
                CHECK(ready[f2]);  /* read ahead from ready: still there */
                attempts[f2]++;
                if
                :: ok2 -> commit_state(f2); ready[f2] = 0
                :: else ->
                    if
                    :: attempts[f2] >= MAXA -> dead_letter(f2); ready[f2] = 0
                    :: else
                    fi
                fi
            :: else
            fi;
            /* the next turn (claimed by the same statement on PostgreSQL) or the release */
            if
            :: kg ->
                claim_head(nxt, fatt);
                if
                :: nxt == NONE -> release()
                :: else
                fi
            :: else -> release()
            fi;
            if
            :: nxt != NONE ->
                printf("P%d.%d commits (fence passed) and claims message %d (attempt %d)\n",
                       me, w, nxt, fatt)
            :: else -> printf("P%d.%d commits (fence passed) and releases the lease\n", me, w)
            fi
        :: else ->
            committed = 0;
            printf("P%d.%d commit fenced out (LostActivation): nothing written\n", me, w)
        fi
    }
    if
    :: !committed || nxt == NONE -> goto top
    :: else
    fi;
    if
    :: fatt > MAXA ->
        /* the next turn is out of attempts: dead-letter it and claim the following one, in a
         * second transaction that re-checks the lease under the row lock */
        CRASHPOINT;
        d_step {
            FREE_LOCK;
#ifndef NO_RECHECK
            if
            :: OUR_LEASE ->
#endif
                claim_runnable(nxt, fatt);
                if
                :: nxt == NONE -> release()
                :: else
                fi
#ifndef NO_RECHECK
            :: else -> nxt = NONE
            fi
#endif
        };
        if
        :: nxt == NONE -> goto top
        :: else
        fi
    :: else
    fi;
    d_step {
        first = nxt; nxt = NONE; f1 = NONE; f2 = NONE;
        committed = 0; ok0 = 0; ok1 = 0; ok2 = 0; kg = 0
    }
    goto turns
}

/* ---------------------------------------------------------------- dead-process cleanup */
#define STALE_P(p) ((p) <= NP && stale[p] && !stopped[p])
#define ANY_STALE (STALE_P(1) || STALE_P(2) || STALE_P(3) || STALE_P(4) || STALE_P(5) \
                   || STALE_P(6) || STALE_P(7))
#if NP > 7
#error "at most 7 process ids"
#endif

active proctype Cleanup()
{
    byte dset;         /* the processes found dead (a bit per process id) */
#ifdef OLD_CLEANUP
    byte snap = NONE;  /* what the INSERT ... SELECT read */
    byte sv_owner, sv_tok;
    bit sv_exp;
#endif
end_cleanup:
    do
    :: d_step {
           /* SELECT id FROM processes WHERE the heartbeat is stale AND not stopped */
           ANY_STALE ->
           dset = 0;
           for (hi : 1 .. NP) {
               if
               :: stale[hi] && !stopped[hi] ->
                   dset = dset | (1 << hi);
                   printf("cleanup: P%d looks dead\n", hi)
               :: else
               fi
           }
           hi = 0
       }
#ifndef OLD_CLEANUP
       /* For each instance (a plain read found) that one of them leases or holds a claim on,
        * one short transaction under the instance row lock. The read may also have missed
        * this instance (it was not held yet when read): then nothing happens to it. */
       if
       :: d_step {
              FREE_LOCK;
              if
              :: claim_msg != NONE && IN(dset, claim_pid) ->
                  printf("cleanup (row lock held): requeues message %d claimed by P%d\n",
                         claim_msg, claim_pid)
              :: else
              fi;
              if
              :: lease_tok != 0 && IN(dset, lease_owner) ->
                  printf("cleanup (row lock held): clears the lease of P%d\n", lease_owner)
              :: else
              fi;
              release_owned(dset)
          }
       :: true
       fi;
#else
       /* The cleanup before the fix: one transaction, three statements.
        * (1) clear the leases the dead processes own: takes the row lock only if it matches */
       d_step {
           if
           :: lease_tok != 0 && IN(dset, lease_owner) ->
               sv_owner = lease_owner; sv_tok = lease_tok; sv_exp = lease_exp;
               clear_lease();
               cl_locked = 1;
               printf("old cleanup (1): clears the lease of P%d\n", sv_owner)
           :: else ->
               printf("old cleanup (1): the lease is not a dead process's: no row lock\n")
           fi
       }
       /* (2) INSERT INTO ready SELECT ... FROM claimed WHERE process_id IN (dead): the SELECT
        * reads the snapshot taken when the statement starts */
       d_step {
           if
           :: claim_msg != NONE && IN(dset, claim_pid) -> snap = claim_msg
           :: else -> snap = NONE
           fi;
           if
           :: snap != NONE ->
               printf("old cleanup (2): its snapshot sees message %d claimed by P%d\n",
                      snap, claim_pid)
           :: else
           fi
       }
       /* ... its rows are inserted, (3) DELETE FROM claimed WHERE process_id IN (dead), and
        * the transaction commits: the claimed row read in (2) may have been recovered and
        * claimed again meanwhile */
       d_step {
           if
           :: snap != NONE && ready[snap] ->
               /* unique violation on ready_messages: the whole transaction rolls back */
               if
               :: cl_locked -> lease_owner = sv_owner; lease_tok = sv_tok; lease_exp = sv_exp
               :: else
               fi
           :: else ->
               if
               :: snap != NONE ->
                   ready[snap] = 1;
                   printf("old cleanup (2): inserts message %d into ready\n", snap)
               :: else
               fi;
               if
               :: claim_msg != NONE && IN(dset, claim_pid) -> clear_claim()
               :: else
               fi
           fi;
           cl_locked = 0; snap = NONE; sv_owner = 0; sv_tok = 0; sv_exp = 0
       }
#endif
       /* mark them stopped, each only if its heartbeat is still stale (a process that
        * heartbeated meanwhile was only slow: it stays registered, and the lease released
        * above fails its fence) */
       d_step {
           for (hi : 1 .. NP) {
               if
#ifndef OLD_CLEANUP
               :: IN(dset, hi) && stale[hi] -> stopped[hi] = 1
#else
               :: IN(dset, hi) -> stopped[hi] = 1
#endif
               :: else
               fi
           }
           hi = 0; dset = 0
       }
    od
}

/* ---------------------------------------------------------------- the environment */
/* A fault: the process holding the lease or the claim is paused (VM, GC) long enough for
 * its heartbeat to go stale; it keeps running afterwards and may try to commit with its old
 * lease. (Pausing a process that holds nothing changes nothing but its registration, which
 * a graceful stop covers.) */
#define PAUSE_PROCESS(p) \
    :: d_step { faults < MAXF && cur_pid[p] != 0 && !stale[cur_pid[p]] \
                && (lease_owner == cur_pid[p] \
                    || (claim_msg != NONE && claim_pid == cur_pid[p])) -> \
                faults++; stale[cur_pid[p]] = 1; \
                printf("P%d is paused (its heartbeat goes stale)\n", cur_pid[p]) }

active proctype Environment()
{
end_environment:
    do
    /* time passes: the lease of a holder that stopped renewing (paused, dead) expires */
    :: d_step { lease_tok != 0 && !lease_exp && stale[lease_owner] -> lease_exp = 1;
                printf("the lease of P%d expires\n", lease_owner) }
    PAUSE_PROCESS(0)
#if NPROC > 1
    PAUSE_PROCESS(1)
#endif
#if NPROC > 2
    PAUSE_PROCESS(2)
#endif
#ifdef ADMIN_PAUSE
    /* an operator pauses the actor (leases are refused), and resumes it */
    :: d_step { !apaused && admin_pauses < 1 && FREE_LOCK && !destroyed ->
                apaused = 1; admin_pauses++; printf("the actor is paused\n") }
    :: d_step { apaused && FREE_LOCK -> apaused = 0; printf("the actor is resumed\n") }
#endif
#ifdef DESTROY
    /* ref.destroy(): lock and delete the row; the mailbox rows go with it */
    :: d_step {
           !destroyed && FREE_LOCK ->
           destroyed = 1;
           for (hi : 0 .. NM - 1) { ready[hi] = 0 }
           hi = 0;
           clear_claim();
           clear_lease();
           printf("the actor is destroyed\n")
       }
#endif
    od
}

/* ---------------------------------------------------------------- the producer */
#ifdef PRODUCER
active proctype Producer()
{
    do
    /* enqueue: lock the instance row, take the next sequence, insert the ready row */
    :: d_step { enq < NM && FREE_LOCK && !destroyed -> ready[enq] = 1;
                printf("message %d is enqueued\n", enq); enq++ }
    :: enq == NM || destroyed -> break
    od
}
#endif

/* ---------------------------------------------------------------- properties */

/* 1. Safety. The asserts marked "commits at most once" sit at every step that commits a
 * message's outcome. This monitor checks, between all steps, that no message is both ready
 * and claimed, and that a finished message is neither. */
#define CLEAN(x) (x >= NM || (!(ready[x] && claim_msg == x) \
                              && !(TERMINAL(x) && (ready[x] || claim_msg == x))))
#define INVARIANT (CLEAN(0) && CLEAN(1) && CLEAN(2))

#if !defined(NO_MONITOR) && !defined(LIVENESS) && !defined(COMMIT_CHECK_ONLY)
active proctype Monitor()
{
end_monitor:
    atomic {
        !INVARIANT ->
        printf("MONITOR: a message is ready and claimed, or finished and still queued\n");
        assert(INVARIANT)
    }
}
#endif

/* 2. Liveness: every message is enqueued and eventually completes or is dead-lettered
 * (pan -a -f: weak fairness; faults are bounded by MAXF). */
#define FINISHED(x) (x >= NM || TERMINAL(x))
#ifdef LIVENESS
ltl progress { <> (enq == NM && FINISHED(0) && FINISHED(1) && FINISHED(2)) }
#endif

init {
    atomic {
#ifndef PRODUCER
        for (hi : 0 .. NM - 1) { ready[hi] = 1 }
        enq = NM;
#endif
        for (hi : 0 .. NPROC - 1) { cur_pid[hi] = hi + 1 }
        hi = 0;
        for (hj : 0 .. NW - 1) { run Worker(hj / THREADS, hj) }
        hj = 0
    }
}
