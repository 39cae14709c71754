"""Record ids (``trellis.db.new_id``): 128 random bits as hex, never repeated within a process, its
threads, or a process forked from it (the ids are read from the OS in batches)."""

from __future__ import annotations

import os
import re
import threading

from trellis import db


def test_ids_are_32_hex_characters_and_never_repeat():
    ids = [db.new_id() for _ in range(5_000)]  # ~20 batches
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_threads_never_take_the_same_id():
    taken: list[list[str]] = [[] for _ in range(8)]

    def take(into: list[str]) -> None:
        for _ in range(2_000):
            into.append(db.new_id())

    threads = [threading.Thread(target=take, args=(into,)) for into in taken]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [i for into in taken for i in into]
    assert len(set(every)) == len(every) == 16_000


def test_a_forked_child_does_not_repeat_its_parents_next_ids():
    db.new_id()  # the parent holds an unused batch when it forks
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, then out without running the parent's cleanup
        try:
            os.write(write, ",".join(db.new_id() for _ in range(5)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = pipe.read().split(",")
    os.waitpid(pid, 0)
    parent = [db.new_id() for _ in range(5)]
    assert len(child) == 5
    assert not set(child) & set(parent)
