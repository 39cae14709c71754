"""The event log (trellis.events): recorded in the writer's transaction, numbered in commit order,
fanned out in-process and through Redis, gaps filled from the table, pruned by the retention job.

These tests commit (the sequencer only sees committed rows), so they empty the log before and after.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from datetime import timedelta

import pytest
import redis
import sqlalchemy as sa

from trellis import create_app, db, events
from trellis.models import EventRecord, PendingEvent
from trellis.testing.plugin import database_kind, reachable_redis

REDIS_URL = os.environ.get("TRELLIS_TEST_EVENTS_REDIS_URL", "redis://127.0.0.1:6379/7")
WAIT = 10.0
table = EventRecord.__table__


def _empty(app) -> None:
    with app.extensions["trellis"].engine.begin() as connection:
        connection.execute(table.delete())
        connection.execute(PendingEvent.__table__.delete())
    app.extensions["trellis_events"].reset()


@pytest.fixture()
def log(app):
    """The app's event log, empty, inside an app context (committed writes, emptied afterwards)."""
    _empty(app)
    with app.app_context():
        yield app.extensions["trellis_events"]
        db.session.remove()
    _empty(app)


def _commit(*topics: str, payload: dict | str | None = None) -> None:
    for topic in topics:
        events.record(topic, {"document": {"_id": topic}} if payload is None else payload)
    db.session.commit()


def _rows() -> list[tuple]:
    with db.engine().connect() as connection:
        recorded = events.recorded()  # numbered or still pending
        return connection.execute(
            sa.select(recorded.c.id, recorded.c.event_id, recorded.c.topic).order_by(recorded.c.id)
        ).all()


def _eventually(read, timeout: float = WAIT):
    deadline = time.monotonic() + timeout
    while not (found := read()) and time.monotonic() < deadline:
        time.sleep(0.02)
    return found


def _collect(pattern: str = "*.*.*") -> tuple[queue.Queue, object]:
    inbox: queue.Queue = queue.Queue()
    return inbox, events.subscribe(pattern, inbox.put)


def test_record_commits_with_the_change_and_rollback_records_nothing(log):
    events.record("database.Item.create", {"document": {"_id": "a"}})
    db.session.rollback()
    assert _rows() == []

    events.record("database.Item.create", {"document": {"_id": "b", "title": "é"}})
    events.record("database.Item.update", '{"document":{"_id":"b"},"previous":{"_id":"b"}}')  # text as given
    db.session.commit()
    log.publish(log.sequence())
    found = events.read(0)
    assert [(e.topic, e.family, e.payload) for e in found] == [
        ("database.Item.create", "database.Item", {"document": {"_id": "b", "title": "é"}}),
        ("database.Item.update", "database.Item", {"document": {"_id": "b"}, "previous": {"_id": "b"}}),
    ]
    assert [e.id for e in found] == [1, 2]
    assert events.latest() == 2 and events.oldest() == 1 and events.oldest("database.Item") == 1
    assert events.oldest("chat.message") is None
    assert events.read(1, family="database.Item") == found[1:]
    assert events.read(0, family="database.Other") == []
    assert found[0].created_at.endswith("Z")


def test_sequencer_numbers_contiguously_after_commit(log):
    inbox, unsubscribe = _collect("database.*.create")
    _commit("database.A.create", "database.B.update", "database.C.create")
    got = [inbox.get(timeout=WAIT), inbox.get(timeout=WAIT)]  # the poke after commit; no manual pass
    assert [(e.id, e.topic) for e in got] == [(1, "database.A.create"), (3, "database.C.create")]
    assert [row[1] for row in _rows()] == [1, 2, 3]
    unsubscribe()
    _commit("database.D.create")
    assert _eventually(lambda: events.read(3))[0].topic == "database.D.create"
    with pytest.raises(queue.Empty):
        inbox.get(timeout=0.5)


@pytest.mark.skipif(database_kind() != "postgresql", reason="SQLite has one writer: commits are in insert order")
def test_event_ids_follow_commit_order_not_insert_order(log, app):
    events.record("test.order.first-inserted", {})
    with app.app_context():  # a second transaction, committing first
        events.record("test.order.second-inserted", {})
        db.session.commit()
        db.session.remove()
    log.sequence()
    db.session.commit()
    log.sequence()
    assert [e.topic for e in events.read(0)] == ["test.order.second-inserted", "test.order.first-inserted"]
    rows = _rows()
    assert rows[0][2] == "test.order.first-inserted" and rows[0][1] == 2  # inserted first, numbered second


@pytest.mark.skipif(database_kind() != "postgresql", reason="PostgreSQL's pass: SQLite numbers as it inserts")
def test_the_pass_moves_events_with_a_statement_prepared_on_its_connection(log):
    for _ in range(7):  # past PostgreSQL's five custom plans of a prepared statement
        _commit("database.Item.create")
        log.sequence()
    assert [e.id for e in events.read(0)] == list(range(1, 8))
    engine = log.read_engine
    held = [engine.connect() for _ in range(engine.pool.checkedin())]
    try:
        moves = [
            row
            for connection in held
            for row in connection.exec_driver_sql(
                "SELECT generic_plans + custom_plans FROM pg_prepared_statements WHERE statement LIKE %s",
                ("%DELETE FROM core_events_pending%",),
            ).all()
        ]
    finally:
        for connection in held:
            connection.close()
    assert moves and sum(runs for (runs,) in moves) >= 7  # every pass ran the prepared move


def test_two_concurrent_writers_get_contiguous_ids_in_their_own_order(log, app):
    inbox, _ = _collect("writer.*.*")
    per_writer = 40

    def write(name: str) -> None:
        with app.app_context():
            for number in range(per_writer):
                events.record(f"writer.{name}.n", {"n": number})
                db.session.commit()
            db.session.remove()

    threads = [threading.Thread(target=write, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    got = [inbox.get(timeout=WAIT) for _ in range(2 * per_writer)]
    assert [e.id for e in got] == list(range(1, 2 * per_writer + 1))  # delivered once each, in order
    for name in ("a", "b"):
        assert [e.payload["n"] for e in got if e.topic == f"writer.{name}.n"] == list(range(per_writer))
    assert [e.id for e in events.read(0, limit=1000)] == list(range(1, 2 * per_writer + 1))


def test_receiver_fills_a_gap_from_the_table_and_polls_for_a_lost_last_message(log):
    inbox, _ = _collect()
    base = events.latest()
    now = db.utcnow()
    # Numbered by "another process" whose publication never arrived.
    with db.engine().begin() as connection:
        for number in (1, 2, 3):
            connection.execute(
                table.insert().values(
                    event_id=base + number, topic=f"gap.t.{number}", family="gap.t", payload="{}", created_at=now
                )
            )
    log.offer([events.Event(base + 3, "gap.t.3", "gap.t", {}, db.isoformat(now))])
    assert [inbox.get(timeout=WAIT).id for _ in range(3)] == [base + 1, base + 2, base + 3]
    log.offer([events.Event(base + 2, "gap.t.2", "gap.t", {}, db.isoformat(now))])  # a late duplicate
    with db.engine().begin() as connection:
        connection.execute(
            table.insert().values(event_id=base + 4, topic="gap.t.4", family="gap.t", payload="{}", created_at=now)
        )
    assert inbox.get(timeout=WAIT).id == base + 4  # no message at all: the 1 s poll finds it
    with pytest.raises(queue.Empty):
        inbox.get(timeout=0.3)


def test_a_batch_published_before_an_earlier_one_waits_for_it_not_for_the_table(log):
    inbox, _ = _collect("early.*.*")
    base = events.latest()
    now = db.isoformat(db.utcnow())
    # Two processes numbered base+1 then base+2 but published in the other order; neither row is in the
    # table, so only the wait for the earlier batch delivers both.
    log.offer([events.Event(base + 2, "early.t.2", "early.t", {}, now)])
    log.offer([events.Event(base + 1, "early.t.1", "early.t", {}, now)])
    assert [inbox.get(timeout=WAIT).id for _ in range(2)] == [base + 1, base + 2]
    with pytest.raises(queue.Empty):
        inbox.get(timeout=0.3)
    log.reset()  # the receiver is ahead of the table now: start again from what it holds


def test_a_batch_consumer_gets_each_delivered_run_whole_and_a_backlog_one_read_at_a_time(log):
    """``subscribe_batches``: one call per delivered batch with the events matching any of its patterns, in
    order, none left out; a gap read from the table is handed over a read (``BATCH`` rows) at a time, so a
    large backlog is never held whole. A per-event consumer beside it hears every event once."""
    batches: queue.Queue = queue.Queue()
    events.subscribe_batches(("gap.a.*", "gap.c.*"), batches.put)
    each, _ = _collect("gap.*.*")
    base = events.latest()
    now = db.utcnow()
    count = events.BATCH + 6
    rows = [
        {"event_id": base + n, "topic": f"gap.{'ab'[n % 2]}.{n}", "family": f"gap.{'ab'[n % 2]}", "payload": "{}"}
        for n in range(1, count + 1)
    ]
    with db.engine().begin() as connection:  # numbered by "another process" whose publications never arrived
        connection.execute(table.insert(), [{**row, "created_at": now} for row in rows])
    last = rows[-1]
    log.offer([events.Event(last["event_id"], last["topic"], last["family"], {}, db.isoformat(now))])
    assert [each.get(timeout=WAIT).id for _ in range(count)] == [base + n for n in range(1, count + 1)]
    calls: list[list[int]] = []
    while sum(len(call) for call in calls) < count // 2:
        calls.append([event.id for event in batches.get(timeout=WAIT)])
    assert [i for call in calls for i in call] == [base + n for n in range(2, count + 1, 2)]
    assert len(calls) >= 2 and all(0 < len(call) <= events.BATCH // 2 for call in calls), [len(c) for c in calls]
    with pytest.raises(queue.Empty):
        batches.get(timeout=0.3)


@pytest.mark.skipif(database_kind() != "postgresql", reason="PostgreSQL's pending table: SQLite numbers as it inserts")
def test_the_pass_that_drains_a_large_backlog_vacuums_the_pending_table(log):
    """Rows a pass moves are dead in the pending table until a vacuum, and a read of the whole table reads
    them all; once VACUUM_AFTER_ROWS have moved, the pass that drains it vacuums it (here to nothing)."""
    from trellis.events.sequencer import VACUUM_AFTER_ROWS

    def pending_pages() -> int:
        with db.engine().connect() as connection:
            return connection.exec_driver_sql("SELECT pg_relation_size('core_events_pending') / 8192").scalar()

    base = events.latest()
    events.record_many("vacuum.t.x", [{"n": n} for n in range(VACUUM_AFTER_ROWS + 10)])
    db.session.commit()
    assert _eventually(lambda: events.latest() == base + VACUUM_AFTER_ROWS + 10)
    assert _eventually(lambda: pending_pages() == 0), pending_pages()
    events.record_many("vacuum.t.x", [{"n": n} for n in range(10)])  # below the threshold: left to autovacuum
    db.session.commit()
    assert _eventually(lambda: events.latest() == base + VACUUM_AFTER_ROWS + 20)
    assert pending_pages() > 0


@pytest.mark.skipif(database_kind() != "postgresql", reason="PostgreSQL's pass")
def test_the_pass_planned_on_an_empty_pending_table_probes_the_batch_in_its_index(log):
    """The move's generic plan, made while the pending table is empty (a vacuum truncated it), must not join
    every pending row to the batch: that plan took seconds a pass once a bulk load filled the table."""
    from trellis.events.sequencer import _NUMBER

    with db.engine().connect() as connection:
        connection.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("VACUUM core_events_pending")
        connection.exec_driver_sql("SET plan_cache_mode = force_generic_plan")
        connection.exec_driver_sql("SET enable_seqscan = off")  # as the pass sets it (its preceding statement)
        connection.exec_driver_sql(f"PREPARE probe(int) AS {str(_NUMBER).replace(':batch', '$1')}")
        try:
            plan = "\n".join(row[0] for row in connection.exec_driver_sql("EXPLAIN EXECUTE probe(1000)"))
        finally:
            connection.exec_driver_sql("DEALLOCATE probe")
            connection.exec_driver_sql("RESET plan_cache_mode; RESET enable_seqscan")
    assert "Join" not in plan and "Index Cond: (id = ANY" in plan, plan


def test_retention_keeps_recent_events_and_the_last_n_of_each_family(app_config, log):
    pruning = create_app({**app_config, "EVENTS_RETENTION_SECONDS": 600, "EVENTS_RETENTION_COUNT": 3})
    old, recent = db.utcnow() - timedelta(minutes=30), db.utcnow()
    rows = [("busy.a", old)] * 6 + [("busy.a", recent)] * 2 + [("quiet.b", old)] * 2
    with db.engine().begin() as connection:
        for number, (family, at) in enumerate(rows, 1):
            connection.execute(
                table.insert().values(event_id=number, topic=family + ".x", family=family, payload="{}", created_at=at)
            )
    try:
        with pruning.app_context():
            assert pruning.extensions["trellis_events"].prune() == 5  # busy.a 1-5: old and not in its last 3
    finally:
        pruning.extensions["trellis"].engine.dispose()
    assert [row[1] for row in _rows()] == [6, 7, 8, 9, 10]
    assert events.oldest("busy.a") == 6 and events.oldest("quiet.b") == 9


@pytest.fixture()
def redis_url() -> str:
    return reachable_redis(REDIS_URL)


def test_fan_out_through_redis_reaches_another_app(app_config, log, redis_url):
    log.stop()  # the test app (no Redis) must not number the writer's event before the writer does
    writer = create_app({**app_config, "REDIS_URL": redis_url})
    reader = create_app({**app_config, "REDIS_URL": redis_url})
    listener = redis.Redis.from_url(redis_url).pubsub(ignore_subscribe_messages=True)
    listener.subscribe(writer.extensions["trellis_events"].channel)
    try:
        with reader.app_context():
            inbox, _ = _collect("database.*.*")
        with writer.app_context():
            _commit("database.Item.create", payload={"document": {"_id": "x"}})
            db.session.remove()
        event = inbox.get(timeout=WAIT)
        assert (event.id, event.topic, event.payload) == (1, "database.Item.create", {"document": {"_id": "x"}})
        message = _eventually(lambda: listener.get_message(timeout=0.1))  # None for the subscribe confirmation
        assert message["data"].startswith(b'[[1,"database.Item.create"')
    finally:
        listener.close()
        for other in (writer, reader):
            other.extensions["trellis_events"].stop()
            other.extensions["trellis"].engine.dispose()


def test_a_publication_carries_each_payload_as_stored_and_decodes_to_the_same_events():
    """The sequencer publishes the stored JSON text without decoding it (``Numbered.wire``); a receiver
    (``fanout.heard``) decodes the message to the events ``read`` gives."""
    stored = '{"document":{"_id":"b","title":"é \\"quoted\\" \\u2028"},"previous":null}'
    numbered = [
        events.Numbered(7, "database.Item.update", "database.Item", stored, "2026-11-26T13:00:00.000Z"),
        events.Numbered(8, 'odd."topic', 'odd."topic', "{}", "2026-11-26T13:00:01.000Z"),
    ]
    message = "[" + ",".join(n.wire() for n in numbered) + "]"
    decoded = [events.Event(*item) for item in json.loads(message)]
    assert decoded == [n.event() for n in numbered]
    assert decoded[0].payload == {"document": {"_id": "b", "title": 'é "quoted" \u2028'}, "previous": None}
    assert decoded[1].topic == 'odd."topic'


def test_a_process_nobody_listens_in_drops_what_it_hears_and_a_later_consumer_hears_only_what_follows(
    app_config, log, redis_url
):
    """A publication reaching a process without consumers is not decoded (``fanout.heard``); a consumer that
    subscribes later, even after an earlier one left, starts at the head of the log, not at what the
    process heard before it."""
    log.stop()
    writer = create_app({**app_config, "REDIS_URL": redis_url})
    reader = create_app({**app_config, "REDIS_URL": redis_url})
    heard = reader.extensions["trellis_events"]
    listener = redis.Redis.from_url(redis_url).pubsub(ignore_subscribe_messages=True)
    listener.subscribe(writer.extensions["trellis_events"].channel)

    def write(n: int) -> None:
        with writer.app_context():
            _commit("database.Item.create", payload={"document": {"n": n}})
            db.session.remove()
        assert _eventually(lambda: listener.get_message(timeout=0.1))  # published, so heard by the reader too

    try:
        with reader.app_context():
            heard.start()
            write(1)
            time.sleep(0.3)
            # Nothing kept of what nobody asked for.
            assert heard.receiver._delivered is None and heard.receiver._inbox == []
            inbox, unsubscribe = _collect("database.*.*")
            write(2)
            assert inbox.get(timeout=WAIT).payload == {"document": {"n": 2}}
            unsubscribe()
            write(3)
            write(4)
            again, _ = _collect("database.*.*")
            write(5)
            assert again.get(timeout=WAIT).payload == {"document": {"n": 5}}  # not 3 and 4, heard by nobody
            with pytest.raises(queue.Empty):
                again.get(timeout=1.5)  # nor later, from the receiver's poll
            assert inbox.empty()
    finally:
        listener.close()
        for other in (writer, reader):
            other.extensions["trellis_events"].stop()
            other.extensions["trellis"].engine.dispose()
