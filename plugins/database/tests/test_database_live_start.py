"""Where a subscription without ``since`` starts: after :meth:`LiveHub.now`, whatever this process delivered
while the subscribe was still reading (its viewer, its filter: reads that let the log's receiver run). An
event numbered after that start and delivered before the subscription was added is read from the log when
it starts, once: exactly what a subscriber added in time is sent. Real database and event log (a committing
app); the subscriptions' ``send`` collects."""

from __future__ import annotations

from typing import Any

from trellis_database import live_access
from trellis_database.live import LiveHub, Subscription

from .test_database_live_batches import World, world  # noqa: F401  (world: a fixture)

KINDS = frozenset({"create", "update", "delete", "enter", "leave"})


def _subscription(world: World, received: list[Any], start: int, user: Any = None) -> Subscription:
    return Subscription(
        schema="Note",
        kinds=KINDS,
        predicate=None,
        filter_key="",
        send=received.append,
        owner="late" if user is None else f"late {user.id}",
        user_id=None if user is None else user.id,
        since=None,
        last=start,
        viewer=None if user is None else live_access.user_viewer(user.id),
    )


def test_events_delivered_between_now_and_add_reach_the_subscription_once(world):
    start = world.head()
    notes = world.many("Note", [{"n": n, "viewers": world.viewers(n)} for n in range(6)])
    batch = world.events_after(start)
    hub = LiveHub(world.app)
    hub._stop_listening = []  # fed by the test alone
    late: dict[str, list[Any]] = {"admin": [], "user0": []}
    with world.app.app_context():
        hub.judge(batch)  # delivered while the subscribe was reading: nobody is subscribed yet
        subscriptions = [
            _subscription(world, late["admin"], start),
            _subscription(world, late["user0"], start, world.users[0]),
        ]
        for subscription in subscriptions:
            hub.add(subscription)
            hub.start(subscription)
        started = {who: list(changes) for who, changes in late.items()}
        hub.judge(batch)  # the same events again (a second delivery): nothing is sent twice
    assert late == started
    ids = [note["_id"] for note in notes]
    assert [change["document"]["_id"] for change in late["admin"]] == ids
    assert [change["eventId"] for change in late["admin"]] == [event.id for event in batch]
    # user0 reads the Notes that name it (world.viewers: n % 3 in (0, 1))
    assert [change["document"]["_id"] for change in late["user0"]] == [ids[n] for n in range(6) if n % 3 != 2]
