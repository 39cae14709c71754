"""``bench/common.py``: the interval the peer benchmark prints beside a median of rounds (``median_interval``),
the interpreter its reports name (``interpreter``) and the instruction counter of ``bench.request_instructions``
(``Callgrind``).

``bench`` is not on the tests' import path (pytest's importlib mode), so the file is loaded by its path."""

from __future__ import annotations

import importlib.util
import itertools
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("bench_common", Path(__file__).parents[1] / "bench" / "common.py")
_common = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("bench_common", _common)  # its dataclasses look their module up there
_spec.loader.exec_module(_common)
median_interval = _common.median_interval
interpreter = _common.interpreter
Callgrind, callgrind_prefix = _common.Callgrind, _common.callgrind_prefix


def _coverage(n: int, k: int) -> float:
    """By enumeration: the share of the 2ⁿ above/below patterns of n rounds around the true median in which
    the k-th lowest and the k-th highest round lie on either side of it."""
    hits = sum(1 for signs in itertools.product((0, 1), repeat=n) if k <= sum(signs) <= n - k)
    return hits / 2**n


def test_eight_rounds_bracket_the_median_with_the_second_and_seventh():
    rounds = [0.88, 1.01, 1.05, 0.90, 0.86, 1.25, 0.98, 1.02]
    low, high, coverage = median_interval(rounds)
    assert (low, high) == (0.88, 1.05)
    assert coverage == _coverage(8, 2) == 1 - 2 * 9 / 256


def test_too_few_rounds_give_the_lowest_and_highest_with_their_lower_coverage():
    assert median_interval([1.2, 0.9, 1.0]) == (0.9, 1.2, 0.75)


def test_the_interval_is_the_narrowest_that_keeps_ninety_per_cent():
    for n in range(2, 16):
        low, high, coverage = median_interval([float(i) for i in range(n)])
        k = int(low) + 1
        assert high == n - k
        assert coverage == _coverage(n, k)
        assert coverage >= 0.9 or k == 1  # too few rounds: the widest pair is all there is
        assert k + 1 > n // 2 or _coverage(n, k + 1) < 0.9  # one step narrower would lose the confidence


def test_reports_name_the_interpreter_behind_the_virtualenv():
    # The servers run on sys.executable; a virtualenv's python is a link to the build that matters.
    named = interpreter()
    assert named.startswith(f"{platform.python_implementation()} {platform.python_version()} (")
    assert named.endswith(f"({os.path.realpath(sys.executable)})")


# A child that runs a loop of the length it reads from stdin, then says so: work on demand, between counts.
_LOOPER = "import sys\nfor line in sys.stdin:\n    for _ in range(int(line)): pass\n    print('done', flush=True)\n"


@pytest.mark.skipif(shutil.which("callgrind_control") is None, reason="valgrind is not installed")
def test_callgrind_counts_the_work_between_zero_and_dump(tmp_path):
    # HOST set as the servers' environment sets it: valgrind names its control pipes after it.
    env = {**os.environ, "HOST": "127.0.0.1"}
    command = [*callgrind_prefix(tmp_path), sys.executable, "-u", "-c", _LOOPER]
    child = subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        grind = Callgrind(child.pid, tmp_path, "127.0.0.1")

        def loop(loops: int) -> None:
            child.stdin.write(f"{loops}\n")
            child.stdin.flush()
            assert child.stdout.readline() == "done\n"

        def counted(loops: int) -> int:
            grind.zero()
            loop(loops)
            return grind.dump(f"loop-{loops}")

        loop(1000)  # answered once valgrind runs the child, and pays for the loop's first compilation
        small, large = counted(200_000), counted(400_000)
        assert 1.8 < large / small < 2.2  # a count of what ran since zero(), not of the whole process
        assert large > 400_000 * 10  # a Python loop step is tens of instructions, not one
    finally:
        child.kill()
        child.wait(10)
