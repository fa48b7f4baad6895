"""The compile cache on disk: object code of kernels, keyed by what determines it.

The key hashes the kernel's IR (which already holds the source's meaning:
closure values and template arguments are constants in it, types are on every
statement, fields appear with their slot, shape and dtype), the engine's own
source, the LLVM version and the CPU. Any change to those gives another key;
nothing of the Python source text is trusted by itself.

An entry is one file: a header line (format, key, host, payload length and
SHA-256), then the object code. An entry whose header or checksum does not
match (corrupted, truncated, written by another engine or CPU) is ignored and
overwritten by a fresh compile, never loaded.

Where: `ti.init(offline_cache_file_path=...)`, else $ENGINE_CACHE_DIR, else
~/.cache/engine-kernels. Off: `ti.init(offline_cache=False)`; debug mode never
uses it. Clear: `ti.clear_cache()` or `python -m engine clear-cache`.
"""
import hashlib
import json
import os
import pathlib
import tempfile
import warnings

from .cpu import jit
from ..ir import printer

FORMAT = b'engine-kernel-cache-1'
SUFFIX = '.kobj'
hits = 0       # entries loaded in this process (the tests read it)


def default_dir():
    env = os.environ.get('ENGINE_CACHE_DIR')
    if env:
        return pathlib.Path(env)
    base = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
    return pathlib.Path(base) / 'engine-kernels'


def _engine_fingerprint():
    """The engine's own source: editing the compiler invalidates every entry."""
    h = hashlib.sha256()
    engine = pathlib.Path(__file__).resolve().parent.parent
    for path in sorted(engine.rglob('*.py')):
        h.update(str(path.relative_to(engine)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


_fingerprint = None


def fingerprint():
    global _fingerprint
    if _fingerprint is None:
        _fingerprint = f'{_engine_fingerprint()}|{jit.host_description()}'
    return _fingerprint


# --- keys ---------------------------------------------------------------------------
class Uncacheable(Exception):
    """The IR holds a value without a stable description (then the kernel is just compiled)."""


def key(kind, body, ret_offset):
    """The cache key of one kernel body, or None when it cannot be described stably."""
    try:
        text = key_text(body)
    except Uncacheable:
        return None
    h = hashlib.sha256()
    for part in (FORMAT.decode(), fingerprint(), kind, str(ret_offset), text):
        h.update(part.encode())
        h.update(b'\0')
    return h.hexdigest()


def key_text(body):
    """The IR's text (engine/ir/printer.py: statements numbered by position, values by
    content), refusing a value that has no stable description."""
    try:
        return printer.text(body, strict=True)
    except printer.Unstable as exc:
        raise Uncacheable(str(exc)) from None


# --- entries ------------------------------------------------------------------------
def _path(directory, k):
    return pathlib.Path(directory) / (k + SUFFIX)


def load(directory, k):
    """The object code stored under key k, or None (missing, corrupted or foreign)."""
    global hits
    try:
        raw = _path(directory, k).read_bytes()
    except OSError:
        return None
    obj = _verified_payload(raw, k)
    if obj is not None:
        hits += 1
    return obj


def _verified_payload(raw, k):
    head, sep, payload = raw.partition(b'\n')
    if not sep:
        return None
    try:
        header = json.loads(head)
    except ValueError:
        return None
    expected = dict(format=FORMAT.decode(), key=k, host=jit.host_description(),
                    length=len(payload), sha256=hashlib.sha256(payload).hexdigest())
    return payload if header == expected else None


def store(directory, k, obj):
    """Write an entry atomically (a concurrent reader sees the old file or the new one)."""
    header = dict(format=FORMAT.decode(), key=k, host=jit.host_description(),
                  length=len(obj), sha256=hashlib.sha256(obj).hexdigest())
    tmp = None
    try:
        directory = pathlib.Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, suffix='.tmp')
        with os.fdopen(fd, 'wb') as f:
            f.write(json.dumps(header).encode() + b'\n' + obj)
        os.chmod(tmp, 0o644 & ~_umask())   # mkstemp's 0600 would keep a shared cache from other accounts
        os.replace(tmp, _path(directory, k))
    except OSError as error:
        # a read-only or full disk only costs the next run a compile: the kernel runs, and
        # the user hears of it once per directory
        if tmp is not None:
            pathlib.Path(tmp).unlink(missing_ok=True)
        if str(directory) not in _warned:
            _warned.add(str(directory))
            warnings.warn(f'the kernel cache in {directory} could not be written ({error.strerror or error}); '
                          f'kernels still run, and are compiled again next time', RuntimeWarning, stacklevel=2)


_warned = set()      # cache directories a write failed in (warned once)


_umask_value = None


def _umask():
    """The process's umask, read once (reading it means setting it for an instant)."""
    global _umask_value
    if _umask_value is None:
        _umask_value = os.umask(0o022)
        os.umask(_umask_value)
    return _umask_value


def clear(directory=None):
    """Delete every entry; returns how many were removed."""
    directory = pathlib.Path(directory or default_dir())
    removed = 0
    for path in list(directory.glob('*' + SUFFIX)) + list(directory.glob('*.tmp')):
        path.unlink(missing_ok=True)
        removed += 1
    return removed
