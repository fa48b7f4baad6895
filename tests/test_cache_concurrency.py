"""The compile cache with many processes at once (sweeps run many workers on one cache
directory, a shared one on a cluster): 4 processes compiling, storing and loading the same
kernels into one fresh directory, several rounds, find no corrupt, torn or missing entry,
and compute the right values. An entry is written to a temporary file in the directory and
renamed over the old one (engine/backend/cache.py), so a reader sees the old file or the
new one, and a reader checks the header and checksum before it loads anything."""
import json
import os
import subprocess
import sys
import time

from engine.backend import cache

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROCESSES, ROUNDS, KERNELS = 4, 4, 6

# One process: wait for the common start, then in each round start a fresh program, forget
# the kernels loaded in memory (so that every round goes to the disk), build and run
# KERNELS kernels and an adjoint, check their values, store again every entry it used
# (writers racing readers), and check that every entry it used loads and verifies.
WORKER = r'''
import json, sys, time
import numpy as np
import engine as ti
from engine.backend import cache
from engine.runtime import pipeline

directory, start, kernels, rounds = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
used, corrupt, wrong, missing = set(), [], [], []
load, store, verified = cache.load, cache.store, cache._verified_payload

def checked(raw, k):
    payload = verified(raw, k)
    if payload is None:
        corrupt.append(k)                   # a file under the key (even empty) that does not verify
    return payload

def loading(d, k):
    used.add(k)
    return load(d, k)

def storing(d, k, obj):
    used.add(k)
    store(d, k, obj)

cache._verified_payload, cache.load, cache.store = checked, loading, storing

def one_round():
    pipeline._loaded.clear()
    ti.init(offline_cache_file_path=directory, cpu_max_num_threads=1)
    x = ti.field(ti.f32, shape=64, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)
    for k in range(kernels):
        scale = float(k + 1)

        @ti.kernel
        def fill():
            for i in x:
                x[i] = scale * i
        fill()
        if not np.array_equal(x.to_numpy(), scale * np.arange(64, dtype=np.float32)):
            wrong.append(f'fill {k}')

    @ti.kernel
    def total():
        for i in x:
            loss[None] += ti.sin(x[i] * 0.01)
    with ti.ad.Tape(loss):
        total()
    expected = np.cos(x.to_numpy().astype(np.float64) * 0.01) * 0.01
    if not np.allclose(x.grad.to_numpy(), expected, rtol=1e-5):
        wrong.append('the adjoint of total')

while time.time() < start:
    time.sleep(0.001)
for _ in range(rounds):
    one_round()
    for k in sorted(used):                  # rewrite what others are reading
        obj = load(directory, k)
        if obj is None:
            missing.append(k)
        else:
            store(directory, k, obj)
print(json.dumps(dict(used=sorted(used), corrupt=corrupt, wrong=wrong, missing=missing,
                      compiled=pipeline.compile_count, loaded=cache.hits)))
'''


def test_four_processes_compiling_and_loading_the_same_kernels_at_once(tmp_path):
    directory = tmp_path / 'cache'
    script = tmp_path / 'worker.py'
    script.write_text(WORKER)
    start = time.time() + 3             # after every process has imported the engine
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get('PYTHONPATH', '')]))
    procs = [subprocess.Popen([sys.executable, str(script), str(directory), str(start), str(KERNELS), str(ROUNDS)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
             for _ in range(PROCESSES)]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        reports.append(json.loads(out.splitlines()[-1]))
    for report in reports:
        assert report['corrupt'] == [] and report['missing'] == [] and report['wrong'] == [], report
    keys = {k for report in reports for k in report['used']}
    assert all(set(report['used']) == keys for report in reports)     # the same kernels everywhere
    assert len(keys) >= KERNELS + 2                                     # the fills, total and its adjoint
    # every entry is there once, whole and verified; no temporary file is left behind
    entries = sorted(p.name for p in directory.iterdir())
    assert entries == sorted(k + cache.SUFFIX for k in keys), entries
    assert all(cache.load(directory, k) is not None for k in keys)
    # every process built each kernel once at most; the later rounds all loaded from the disk
    assert all(r['compiled'] <= len(keys) for r in reports)
    assert sum(r['loaded'] for r in reports) >= (ROUNDS - 1) * PROCESSES * len(keys)


def test_a_torn_or_half_written_entry_is_never_loaded(tmp_path):
    """What a reader would see of a writer killed mid-write, or of a file being written in
    place: the entry does not verify, and a store over it replaces it whole."""
    key, obj = 'k' * 64, os.urandom(4096)
    cache.store(tmp_path, key, obj)
    path = tmp_path / (key + cache.SUFFIX)
    whole = path.read_bytes()
    for cut in (0, 10, len(whole) // 2, len(whole) - 1):
        path.write_bytes(whole[:cut])
        assert cache.load(tmp_path, key) is None
    cache.store(tmp_path, key, obj)
    assert cache.load(tmp_path, key) == obj and sorted(os.listdir(tmp_path)) == [path.name]


def test_readers_never_see_a_missing_or_partial_entry_while_it_is_rewritten(tmp_path):
    """Once an entry exists, 3 readers racing a writer that keeps replacing it (1 MiB each
    time) always load a whole one: never None, never a mix of two writes."""
    key, where = 'r' * 64, str(tmp_path)
    payloads = [bytes([i]) * (1 << 20) for i in range(4)]
    cache.store(tmp_path, key, payloads[0])
    head = f'import sys\nsys.path.insert(0, {ROOT!r})\nfrom engine.backend import cache\n'
    reader = head + (f'bad = 0\nfor i in range(300):\n    obj = cache.load({where!r}, {key!r})\n'
                     f'    bad += obj is None or obj != obj[:1] * len(obj)\nprint(bad)\n')
    writer = head + f'for i in range(150):\n    cache.store({where!r}, {key!r}, bytes([i % 4]) * (1 << 20))\n'
    procs = [subprocess.Popen([sys.executable, '-c', writer])]
    procs += [subprocess.Popen([sys.executable, '-c', reader], stdout=subprocess.PIPE, text=True) for _ in range(3)]
    assert procs[0].wait(timeout=300) == 0
    for proc in procs[1:]:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0 and out.strip() == '0'
    assert cache.load(tmp_path, key) in payloads and os.listdir(tmp_path) == [key + cache.SUFFIX]
