"""Native thread pool for the parallel loops of compiled kernels.

The runtime is one LLVM IR module loaded into the JIT; it exports

    void engine_parallel_for(void (*task)(i8*, i64, i64), i8* closure,
                             i64 begin, i64 end, i64 grain, i64* site)

which kernels call directly, so no Python runs while a loop executes.

Which loops go to the pool is measured, not guessed: each parallel loop of a
kernel has a `site` (three words: its cost per iteration in cycle counter
ticks times 256, the smaller of its last two inline runs; a call count; the
last run's cost). A loop runs
inline (and is timed) while its estimated work is below what waking the pool
costs (~20 us); above that it is split, except every 1024th call, which is timed
inline again. Loops of `grain` iterations or fewer always run inline; a null
site means "split whenever above the grain".

Protocol (all shared words are LLVM atomics):
- `busy` is a try-lock owned by the one call that runs on the pool. A call
  that cannot take it (nested call from inside a task, or a concurrent call
  from another Python thread) runs inline, so nesting never deadlocks.
- The owner writes the job, makes `gen` odd (opens the job) and wakes
  sleeping workers. Everyone, owner included, claims chunk indices with a
  fetch-add on `next`; `remaining` counts unfinished chunks. The owner never
  waits for a worker to *arrive*: if workers are slow to wake it runs every
  chunk itself.
- Closing: once `remaining` is 0 the owner makes `gen` even again and waits
  for `refs` to drop to 0. A worker increments `refs` and re-checks `gen`
  before reading the job, so no late worker can apply the old job's task to
  the next job's chunk counter.
- Idle workers spin a little, then futex-wait on `gen`; they count themselves
  in `sleepers` first, so the owner only pays for FUTEX_WAKE when someone
  sleeps. The owner waits for `remaining` the same way.
- Resizing takes `busy` too; surplus workers (id >= limit) exit, missing ones
  are created with pthread_create. A forked child starts with no workers.
"""
import ctypes
import os
import threading
import time

import llvmlite.binding as llvm

from . import jit

# FUTEX syscall numbers of the Linux targets we know; elsewhere the pool has
# no workers and engine_parallel_for always runs inline.
_SYS_FUTEX = {'x86_64': 202, 'aarch64': 98}

_INLINE_ONLY_IR = """
define void @engine_parallel_for(ptr %task, ptr %closure, i64 %begin, i64 %end, i64 %grain, ptr %site) {
  tail call void %task(ptr %closure, i64 %begin, i64 %end)
  ret void
}
define i32 @engine_pool_resize(i32 %want) {
  ret i32 0
}
define void @engine_pool_after_fork() {
  ret void
}
"""

_POOL_IR = """
; Each hot word gets its own cache line: spinning workers poll @gen while
; chunk claiming hammers @next and @remaining.
@busy = internal global i32 0, align 64       ; 1 while a call (or a resize) owns the pool
@gen = internal global i32 0, align 64        ; odd while a job is open; workers futex-wait on it
@sleepers = internal global i32 0, align 64   ; workers inside futex_wait(@gen)
@limit = internal global i32 0, align 64      ; number of workers wanted (ids 0..limit-1)
@alive = internal global i32 0, align 64      ; number of workers running
@tids = internal global [{max_workers} x i64] zeroinitializer   ; pthread_t of worker k
@next = internal global i64 0, align 64       ; next chunk index to claim
@remaining = internal global i32 0, align 64  ; chunks of the open job not finished yet
@waiting = internal global i32 0, align 64    ; owner inside futex_wait(@remaining)
@refs = internal global i32 0, align 64       ; workers that may still read the job
; The job, written by the owner before it opens @gen.
@job_task = internal global ptr null, align 64
@job_closure = internal global ptr null
@job_begin = internal global i64 0
@job_end = internal global i64 0
@job_chunk = internal global i64 0
@job_nchunks = internal global i64 0

declare i64 @syscall(i64, ...)
declare i64 @llvm.readcyclecounter()
declare i64 @llvm.umin.i64(i64, i64)
declare i32 @sched_yield()
declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i32 @pthread_join(i64, ptr)
{relax_decl}

define internal void @relax() alwaysinline {{
  {relax_call}
  ret void
}}

define internal void @futex_wait(ptr %addr, i32 %expected) {{
  %v = zext i32 %expected to i64
  %r = call i64 (i64, ...) @syscall(i64 {sys_futex}, ptr %addr, i64 128, i64 %v, ptr null)
  ret void
}}

define internal void @futex_wake(ptr %addr, i32 %count) {{
  %n = zext i32 %count to i64
  %r = call i64 (i64, ...) @syscall(i64 {sys_futex}, ptr %addr, i64 129, i64 %n)
  ret void
}}

; Claim and run chunks of the open job until none is left.
define internal void @run_chunks() {{
entry:
  %task = load ptr, ptr @job_task
  %closure = load ptr, ptr @job_closure
  %begin = load i64, ptr @job_begin
  %end = load i64, ptr @job_end
  %chunk = load i64, ptr @job_chunk
  %nchunks = load i64, ptr @job_nchunks
  br label %claim
claim:
  %k = atomicrmw add ptr @next, i64 1 monotonic
  %more = icmp slt i64 %k, %nchunks
  br i1 %more, label %body, label %done
body:
  %offset = mul i64 %k, %chunk
  %lo = add i64 %begin, %offset
  %left = sub i64 %end, %lo
  %short = icmp slt i64 %left, %chunk
  %len = select i1 %short, i64 %left, i64 %chunk
  %hi = add i64 %lo, %len
  call void %task(ptr %closure, i64 %lo, i64 %hi)
  ; seq_cst pairs with the owner's store to @waiting (no lost wake-up).
  %r = atomicrmw sub ptr @remaining, i32 1 seq_cst
  %last = icmp eq i32 %r, 1
  br i1 %last, label %notify, label %claim
notify:
  %w = load atomic i32, ptr @waiting seq_cst, align 4
  %sleeping = icmp ne i32 %w, 0
  br i1 %sleeping, label %wake, label %claim
wake:
  call void @futex_wake(ptr @remaining, i32 1)
  br label %claim
done:
  ret void
}}

define internal ptr @worker(ptr %arg) {{
entry:
  %id = ptrtoint ptr %arg to i32
  br label %top
top:
  %last = phi i32 [ 0, %entry ], [ %last, %spin ], [ %last, %woke ], [ %g, %leave ]
  %n = phi i32 [ 0, %entry ], [ %n1, %spin ], [ 0, %woke ], [ 0, %leave ]
  %g = load atomic i32, ptr @gen acquire, align 4
  %lim = load atomic i32, ptr @limit monotonic, align 4
  %surplus = icmp uge i32 %id, %lim
  br i1 %surplus, label %exit, label %check
check:
  %parity = and i32 %g, 1
  %odd = icmp ne i32 %parity, 0
  %unseen = icmp ne i32 %g, %last
  %open = and i1 %odd, %unseen
  br i1 %open, label %join, label %idle
idle:
  %spinning = icmp ult i32 %n, {spin}
  br i1 %spinning, label %spin, label %sleep
spin:
  call void @relax()
  %n1 = add i32 %n, 1
  br label %top
sleep:
  ; Count ourselves before re-checking @gen: the owner bumps @gen before
  ; reading @sleepers, so one of us sees the other's write.
  %s = atomicrmw add ptr @sleepers, i32 1 seq_cst
  %g2 = load atomic i32, ptr @gen seq_cst, align 4
  %same = icmp eq i32 %g2, %g
  br i1 %same, label %wait, label %woke
wait:
  call void @futex_wait(ptr @gen, i32 %g)
  br label %woke
woke:
  %s2 = atomicrmw sub ptr @sleepers, i32 1 seq_cst
  br label %top
join:
  ; Take a reference, then make sure the job is still open (see module doc).
  %r = atomicrmw add ptr @refs, i32 1 seq_cst
  %g3 = load atomic i32, ptr @gen seq_cst, align 4
  %still = icmp eq i32 %g3, %g
  br i1 %still, label %work, label %leave
work:
  call void @run_chunks()
  br label %leave
leave:
  %r2 = atomicrmw sub ptr @refs, i32 1 release
  br label %top
exit:
  %a = atomicrmw sub ptr @alive, i32 1 seq_cst
  ret ptr null
}}

; Slow path of engine_parallel_for; the caller holds @busy.
define internal void @run_parallel(ptr %task, ptr %closure, i64 %begin, i64 %end, i64 %grain) noinline {{
entry:
  %n = sub i64 %end, %begin
  %workers = load atomic i32, ptr @limit monotonic, align 4
  %threads = add i32 %workers, 1
  %t64 = zext i32 %threads to i64
  %parts = mul i64 %t64, {chunks_per_thread}
  %nm1 = sub i64 %n, 1
  %q = sdiv i64 %nm1, %parts
  %even = add i64 %q, 1                       ; ceil(n / parts), n >= 1
  %small = icmp sge i64 %grain, %n             ; below the grain waking the pool does not pay
  %chunk = select i1 %small, i64 %n, i64 %even
  %q2 = sdiv i64 %nm1, %chunk
  %nchunks = add i64 %q2, 1
  %several = icmp sgt i64 %nchunks, 1
  %nonempty = icmp sgt i64 %n, 0
  %go = and i1 %several, %nonempty
  br i1 %go, label %open, label %alone
alone:
  store atomic i32 0, ptr @busy release, align 4
  tail call void %task(ptr %closure, i64 %begin, i64 %end)
  ret void
open:
  store ptr %task, ptr @job_task
  store ptr %closure, ptr @job_closure
  store i64 %begin, ptr @job_begin
  store i64 %end, ptr @job_end
  store i64 %chunk, ptr @job_chunk
  store i64 %nchunks, ptr @job_nchunks
  store atomic i64 0, ptr @next monotonic, align 8
  %nc32 = trunc i64 %nchunks to i32
  store atomic i32 %nc32, ptr @remaining monotonic, align 4
  ; Opening @gen (seq_cst, so also a release) publishes the job.
  %g0 = atomicrmw add ptr @gen, i32 1 seq_cst
  %sl = load atomic i32, ptr @sleepers seq_cst, align 4
  %anyone = icmp ne i32 %sl, 0
  br i1 %anyone, label %wake, label %work
wake:
  %helpers = sub i32 %nc32, 1
  %few = icmp ult i32 %helpers, %workers
  %count = select i1 %few, i32 %helpers, i32 %workers
  call void @futex_wake(ptr @gen, i32 %count)
  br label %work
work:
  call void @run_chunks()
  br label %spin_done
spin_done:
  %i = phi i32 [ 0, %work ], [ %i1, %relax_done ]
  %rem = load atomic i32, ptr @remaining acquire, align 4
  %finished = icmp eq i32 %rem, 0
  br i1 %finished, label %close, label %keep_spinning
keep_spinning:
  %spinning = icmp ult i32 %i, {spin}
  br i1 %spinning, label %relax_done, label %sleep
relax_done:
  call void @relax()
  %i1 = add i32 %i, 1
  br label %spin_done
sleep:
  store atomic i32 1, ptr @waiting seq_cst, align 4
  %rem2 = load atomic i32, ptr @remaining seq_cst, align 4
  %finished2 = icmp eq i32 %rem2, 0
  br i1 %finished2, label %awake, label %wait
wait:
  call void @futex_wait(ptr @remaining, i32 %rem2)
  br label %sleep
awake:
  store atomic i32 0, ptr @waiting monotonic, align 4
  br label %close
close:
  ; Even @gen: workers that have not joined yet will not; wait for those that
  ; did (they only have an empty claim left, so this wait is short).
  %g1 = atomicrmw add ptr @gen, i32 1 seq_cst
  br label %drain
drain:
  %j = phi i32 [ 0, %close ], [ %j1, %drain_relax ], [ %j1, %drain_yield ]
  %refs = load atomic i32, ptr @refs seq_cst, align 4
  %clear = icmp eq i32 %refs, 0
  br i1 %clear, label %release, label %drain_wait
drain_wait:
  %j1 = add i32 %j, 1
  %patient = icmp ult i32 %j, {spin}
  br i1 %patient, label %drain_relax, label %drain_yield
drain_relax:
  call void @relax()
  br label %drain
drain_yield:
  ; A preempted worker holds a reference: give it the CPU.
  %y = call i32 @sched_yield()
  br label %drain
release:
  store atomic i32 0, ptr @busy release, align 4
  ret void
}}

define void @engine_parallel_for(ptr %task, ptr %closure, i64 %begin, i64 %end, i64 %grain, ptr %site) {{
entry:
  %n = sub i64 %end, %begin
  %small = icmp sle i64 %n, %grain
  br i1 %small, label %inline, label %sized
inline:
  tail call void %task(ptr %closure, i64 %begin, i64 %end)
  ret void
sized:
  %adaptive = icmp ne ptr %site, null
  br i1 %adaptive, label %estimate, label %single
estimate:
  ; ticks per 256 iterations when it last ran inline (0: never measured)
  %per = load atomic i64, ptr %site monotonic, align 8
  %work = mul i64 %per, %n
  %cheap = icmp ult i64 %work, {min_parallel_work}
  br i1 %cheap, label %measure, label %recheck
recheck:
  ; every 1024th call of an expensive loop runs inline again: a first measurement
  ; inflated by cold caches must not send a cheap loop to the pool for good
  %calls_at = getelementptr i64, ptr %site, i64 1
  %calls = atomicrmw add ptr %calls_at, i64 1 monotonic
  %turn = and i64 %calls, 1023
  %due = icmp eq i64 %turn, 1023
  br i1 %due, label %measure, label %single
measure:
  %t0 = call i64 @llvm.readcyclecounter()
  call void %task(ptr %closure, i64 %begin, i64 %end)
  %t1 = call i64 @llvm.readcyclecounter()
  %dt = sub i64 %t1, %t0
  %scaled = shl i64 %dt, 8
  %q = udiv i64 %scaled, %n
  %zero = icmp eq i64 %q, 0
  %q1 = select i1 %zero, i64 1, i64 %q
  ; the estimate is the smaller of the last two measurements: one preempted run
  ; must not send a cheap loop to the pool (0 until two runs were timed)
  %last_at = getelementptr i64, ptr %site, i64 2
  %last = load atomic i64, ptr %last_at monotonic, align 8
  store atomic i64 %q1, ptr %last_at monotonic, align 8
  %new = call i64 @llvm.umin.i64(i64 %q1, i64 %last)
  store atomic i64 %new, ptr %site monotonic, align 8
  ret void
single:
  %workers = load atomic i32, ptr @limit monotonic, align 4
  %none = icmp eq i32 %workers, 0
  br i1 %none, label %inline, label %owned
owned:
  ; Test before test-and-set: nested calls only read the flag.
  %b = load atomic i32, ptr @busy monotonic, align 4
  %taken = icmp ne i32 %b, 0
  br i1 %taken, label %inline, label %claim
claim:
  %c = cmpxchg ptr @busy, i32 0, i32 1 acquire monotonic
  %won = extractvalue {{ i32, i1 }} %c, 1
  br i1 %won, label %pool, label %inline
pool:
  tail call void @run_parallel(ptr %task, ptr %closure, i64 %begin, i64 %end, i64 %grain)
  ret void
}}

; Set the number of workers to %want; returns how many are running.
define i32 @engine_pool_resize(i32 %want) {{
entry:
  br label %lock
lock:
  %c = cmpxchg ptr @busy, i32 0, i32 1 acquire monotonic
  %won = extractvalue {{ i32, i1 }} %c, 1
  br i1 %won, label %locked, label %busy
busy:
  %y0 = call i32 @sched_yield()
  br label %lock
locked:
  store atomic i32 %want, ptr @limit seq_cst, align 4
  %have = load atomic i32, ptr @alive seq_cst, align 4
  %shrink = icmp ult i32 %want, %have
  br i1 %shrink, label %stop, label %spawn
stop:
  ; Changing @gen makes every futex_wait on it return, so surplus workers see
  ; the new limit (an even step keeps the pool idle). Each is joined: when this
  ; returns no surplus thread is still on its way out (a fork() meanwhile could
  ; leave the child's thread library with a stack still in use).
  %g = atomicrmw add ptr @gen, i32 2 seq_cst
  call void @futex_wake(ptr @gen, i32 2147483647)
  br label %joining
joining:
  %j = phi i32 [ %want, %stop ], [ %j1, %join_one ]
  %more = icmp ult i32 %j, %have
  br i1 %more, label %join_one, label %done
join_one:
  %j64 = zext i32 %j to i64
  %jslot = getelementptr [{max_workers} x i64], ptr @tids, i64 0, i64 %j64
  %jt = load i64, ptr %jslot
  %jr = call i32 @pthread_join(i64 %jt, ptr null)
  %j1 = add i32 %j, 1
  br label %joining
spawn:
  %id = phi i32 [ %have, %locked ], [ %id1, %created ]
  %need = icmp ult i32 %id, %want
  br i1 %need, label %create, label %done
create:
  %id64 = zext i32 %id to i64
  %arg = inttoptr i64 %id64 to ptr
  %slot = getelementptr [{max_workers} x i64], ptr @tids, i64 0, i64 %id64
  %rc = call i32 @pthread_create(ptr %slot, ptr null, ptr @worker, ptr %arg)
  %ok = icmp eq i32 %rc, 0
  br i1 %ok, label %created, label %failed
created:
  %a1 = atomicrmw add ptr @alive, i32 1 seq_cst
  %id1 = add i32 %id, 1
  br label %spawn
failed:
  store atomic i32 %id, ptr @limit seq_cst, align 4
  br label %done
done:
  %alive = load atomic i32, ptr @alive seq_cst, align 4
  store atomic i32 0, ptr @busy release, align 4
  ret i32 %alive
}}

; In a forked child only the forking thread exists: forget the workers and
; any job or lock held by the parent's other threads.
define void @engine_pool_after_fork() {{
  store atomic i32 0, ptr @limit seq_cst, align 4
  store atomic i32 0, ptr @alive seq_cst, align 4
  store atomic i32 0, ptr @sleepers seq_cst, align 4
  store atomic i32 0, ptr @refs seq_cst, align 4
  store atomic i32 0, ptr @waiting seq_cst, align 4
  store atomic i32 0, ptr @gen seq_cst, align 4
  store atomic i32 0, ptr @busy seq_cst, align 4
  ret void
}}
"""


def _runtime_ir() -> str:
    triple = llvm.get_process_triple()
    arch = triple.split('-')[0]
    if 'linux' not in triple or arch not in _SYS_FUTEX:
        return _INLINE_ONLY_IR
    if arch == 'x86_64':
        # `pause` keeps a spinning hyperthread from starving its sibling;
        # 2000 of them are roughly 10-100 us (CPU dependent) before sleeping.
        relax_decl, relax_call, spin = 'declare void @llvm.x86.sse2.pause()', \
            'call void @llvm.x86.sse2.pause()', 2000
    else:
        relax_decl, relax_call, spin = '', '%y = call i32 @sched_yield()', 50
    # One contiguous chunk per thread: MPM scatters from spatially sorted particles then
    # write mostly different grid cache lines (4 interleaved chunks per thread made
    # diffmpm 0.6-0.8 s on 2 threads, depending on where the vCPUs sat; 1 chunk: 0.57-0.61 s).
    # $ENGINE_CHUNKS_PER_THREAD, for tests: many small chunks put the ends of chunks that
    # threads run at the same time next to each other, where a race between chunks shows.
    chunks = max(1, int(os.environ.get('ENGINE_CHUNKS_PER_THREAD', '1')))
    return _POOL_IR.format(relax_decl=relax_decl, relax_call=relax_call, spin=spin, max_workers=MAX_WORKERS,
                           sys_futex=_SYS_FUTEX[arch], chunks_per_thread=chunks,
                           min_parallel_work=int(_ticks_per_us() * PARALLEL_MIN_US * 256))


MAX_WORKERS = 1023        # threads besides the caller (install() asks for at most this many)
PARALLEL_MIN_US = 10      # a loop is split when it would take longer than this inline


def _ticks_per_us():
    """The cycle counter's rate, measured over a few milliseconds."""
    ir = ('declare i64 @llvm.readcyclecounter()\n'
          'define i64 @engine_ticks() {\n  %t = call i64 @llvm.readcyclecounter()\n  ret i64 %t\n}\n')
    ticks = jit.cfunc(jit.load_object(jit.compile_ir(ir), ['engine_ticks'])['engine_ticks'], ctypes.c_int64)
    start, t0 = time.perf_counter(), ticks()
    time.sleep(0.003)
    rate = (ticks() - t0) / ((time.perf_counter() - start) * 1e6)
    return max(rate, 1.0)


_lock = threading.Lock()
_address = None
_resize = None
_after_fork_native = None
_threads = 1


def _load():
    global _address, _resize, _after_fork_native
    if _address is None:
        names = ['engine_parallel_for', 'engine_pool_resize', 'engine_pool_after_fork']
        addresses = jit.load_object(jit.compile_ir(_runtime_ir()), names)
        jit.export_symbol('engine_parallel_for', addresses['engine_parallel_for'])
        _resize = jit.cfunc(addresses['engine_pool_resize'], ctypes.c_int32, ctypes.c_int32)
        _after_fork_native = jit.cfunc(addresses['engine_pool_after_fork'], None)
        _address = addresses['engine_parallel_for']
        if hasattr(os, 'register_at_fork'):
            os.register_at_fork(after_in_child=_after_fork)


def _after_fork():
    # Worker threads do not survive fork(): run inline until install() again.
    global _lock, _threads
    _lock = threading.Lock()
    _after_fork_native()
    _threads = 1


def install(num_threads: int):
    """Load the runtime (once) and run parallel loops on num_threads threads,
    the calling thread included. Waits for a parallel loop in progress."""
    global _threads
    with _lock:
        _load()
        _threads = _resize(min(max(int(num_threads), 1) - 1, MAX_WORKERS)) + 1


def install_for(prog):
    """Run parallel loops on the program's num_threads (its ti.init's cpu_max_num_threads):
    done when the first kernel of a program is built."""
    if not prog.threads_installed:
        install(prog.config.num_threads)
        prog.threads_installed = True


def num_threads() -> int:
    return _threads


def parallel_for_address() -> int:
    with _lock:
        _load()
    return _address
