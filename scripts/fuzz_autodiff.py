"""Property-based autodiff fuzzing at scale: generated kernels vs finite differences.

Usage: python scripts/fuzz_autodiff.py [--programs 10000]
Runs tests/test_autodiff_properties.py with enough hypothesis examples (10 programs
each) and fresh randomness (not the derandomized run of the test suite).
"""
import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--programs', type=int, default=10000)
    args = parser.parse_args()
    env = dict(os.environ, AUTODIFF_FUZZ_EXAMPLES=str(max(1, args.programs // 10)), AUTODIFF_FUZZ_RANDOM='1')
    test = os.path.join(ROOT, 'tests', 'test_autodiff_properties.py')
    sys.exit(subprocess.call([sys.executable, '-m', 'pytest', '-q', test], env=env, cwd=ROOT))


if __name__ == '__main__':
    main()
