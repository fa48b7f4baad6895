"""What training shows while it runs: a tqdm bar on a terminal, one plain line per
iteration in a log or a pipe, nothing with --quiet.

The first iteration of a process compiles the kernels (or loads them from the disk
cache), which can take seconds: a line says so before it, and how many kernels were
compiled and loaded after it. The bar starts after that iteration, so its ETA and
seconds per iteration are those of the iterations that follow.
"""
import sys

from tqdm import tqdm

from engine.backend import cache
from engine.runtime import pipeline


def compile_counts():
    """(kernels compiled, kernels loaded from the disk cache, seconds) so far in this process."""
    return pipeline.compile_count, cache.hits, pipeline.compile_seconds


def compile_report(before):
    compiled, loaded, seconds = (now - then for now, then in zip(compile_counts(), before))
    return f'kernels ready: {compiled} compiled, {loaded} loaded from the cache ({seconds:.2f} s)'


def compiling(what='the first iteration'):
    return f'compiling kernels for {what} (or loading them from the cache)...'


class LogProgress:
    """One line per iteration through `log` (print by default)."""

    def __init__(self, log=print):
        self.log = log

    def start(self, name, total, done):
        self.total, self.timed = total, []

    def compiling(self):
        self.log(compiling())

    def compiled(self, text):
        self.log(text)

    def update(self, record, first):
        if not first:                 # the first iteration of a process includes compiling
            self.timed.append(record['seconds'])
        done = record['iteration'] + 1
        eta = ''
        if self.timed and done < self.total:
            eta = f', eta {tqdm.format_interval(sum(self.timed) / len(self.timed) * (self.total - done))}'
        self.log(f'iter {record["iteration"]:4d}  loss {record["loss"]:+.6e}  grad_norm {record["grad_norm"]:.4e}'
                 f'  {record["seconds"]:.3f} s  [{done}/{self.total}{eta}]')

    def close(self):
        pass


class BarProgress(LogProgress):
    """A tqdm bar on stderr: iterations done / total, elapsed < ETA, seconds per
    iteration, the last and the best loss."""
    FORMAT = '{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}{postfix}]'

    def __init__(self, file=None):
        super().__init__(log=lambda text: tqdm.write(text, file=self.file))
        self.file = file or sys.stderr
        self.bar = None

    def start(self, name, total, done):
        super().start(name, total, done)
        self.name, self.best = name, float('inf')

    def update(self, record, first):
        self.best = min(self.best, record['loss'])
        if self.bar is None:          # after the compiling iteration: the rate is the real one
            self.bar = tqdm(total=self.total, initial=record['iteration'] + 1, desc=self.name, unit='it',
                            bar_format=self.FORMAT, file=self.file, dynamic_ncols=True)
        else:
            self.bar.update(1)
        rate = self.bar.format_dict['rate']       # iterations per second, smoothed, I/O included
        per = _duration(1 / rate if rate else record['seconds'])
        self.bar.set_postfix_str(f'{per}/it, loss={record["loss"]:.4e}, best={self.best:.4e}', refresh=False)

    def close(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _duration(seconds):
    return f'{seconds:.2f} s' if seconds >= 1 else f'{seconds * 1e3:.1f} ms'


class QuietProgress(LogProgress):
    def __init__(self):
        super().__init__(log=lambda text: None)

    def update(self, record, first):
        pass
