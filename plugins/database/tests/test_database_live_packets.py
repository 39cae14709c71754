"""The Socket.IO packet of a live ``change`` (``live_sockets.packet``): the very bytes python-socketio's emit
encodes, with the part that does not name the subscription encoded once per event."""

from __future__ import annotations

import uuid

from socketio.packet import EVENT, Packet

from trellis_database.live_sockets import _rest, packet


def _change(event_id: int, document: dict, kind: str = "update") -> dict:
    return {
        "subscriptionId": uuid.uuid4().hex,
        "eventId": event_id,
        "event": kind,
        "schema": "Item",
        "document": document,
        "at": "2026-11-26T10:00:00.123456Z",
    }


def _emitted(namespace: str, change: dict) -> str:
    return Packet(EVENT, namespace=namespace, data=["change", change]).encode()


def test_a_change_packet_is_what_python_socketio_encodes():
    document = {
        "_id": "a1",
        "title": 'café ☕ "quoted" \\ \n',
        "n": 1.5,
        "tags": ["x", 2],
        "more": {"k": None, "b": True},
    }
    first = _change(7, document)
    for namespace in ("/database/", "/database"):
        assert packet(namespace, first) == _emitted(namespace, first)
    second = {**first, "subscriptionId": uuid.uuid4().hex}  # another subscriber of the same event
    assert packet("/database/", second) == _emitted("/database/", second)
    assert _rest.get(second) is _rest.get(first)  # the document was encoded once for both

    entered = {**first, "event": "enter"}  # the same event, another kind for another subscriber
    assert packet("/database/", entered) == _emitted("/database/", entered)
    gone = _change(7, {"_id": "a1"}, "leave")  # same event, another document object
    assert packet("/database/", gone) == _emitted("/database/", gone)
    # the same eventId with another document (another app in the same process) is encoded anew
    elsewhere = _change(7, {**document, "n": 2})
    assert packet("/database/", elsewhere) == _emitted("/database/", elsewhere)
    assert packet("/database/", first) == _emitted("/database/", first)
