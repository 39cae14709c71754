"""The app's own Flask (``trellis.app._Flask``) answers Flask's per-request questions the way Flask does.

``ensure_sync`` is asked of every hook and view on every request; Trellis answers it from the code flags
instead of ``inspect`` (bench/results/peer.md, 2026-11-28 noon: instructions per request). The session
interface hands every request the same ``NullSession``, which must still refuse writes. Code on every
request's path reads Flask's context objects through ``trellis.current``, not through their proxies.
"""

from __future__ import annotations

import pytest
from flask import Flask, g, session
from flask import request as flask_request
from flask.sessions import NullSession
from werkzeug.local import LocalProxy

from trellis import current


def _plain() -> str:
    return "plain"


async def _coroutine() -> str:
    return "coroutine"


class _Holder:
    def method(self) -> str:
        return "method"

    async def coroutine_method(self) -> str:
        return "coroutine method"


def _flask_answer(func):
    """What Flask's own ``ensure_sync`` makes of ``func``: the function itself, or an error or a wrapper."""
    try:
        return Flask("reference").ensure_sync(func)
    except RuntimeError as exc:  # async views need the 'async' extra, which Trellis does not install
        return type(exc)


def _our_answer(app, func):
    try:
        return app.ensure_sync(func)
    except RuntimeError as exc:
        return type(exc)


def test_ensure_sync_gives_plain_functions_and_methods_back_as_flask_does(app):
    holder = _Holder()
    for func in (_plain, holder.method, len):
        assert _our_answer(app, func) == func == _flask_answer(func)


def test_ensure_sync_leaves_coroutine_functions_to_flask(app):
    holder = _Holder()
    for func in (_coroutine, holder.coroutine_method):
        ours, flasks = _our_answer(app, func), _flask_answer(func)
        assert ours is not func
        assert ours == flasks or (callable(ours) and callable(flasks))


def test_every_request_gets_a_session_that_refuses_writes_and_sets_no_cookie(app, client):
    sessions = []
    for _ in range(2):
        with app.test_request_context("/health"):
            app.preprocess_request()
            sessions.append(session._get_current_object())
            try:
                session["user"] = "x"
                written = True
            except RuntimeError:
                written = False
            assert not written
    assert isinstance(sessions[0], NullSession) and sessions[0] is sessions[1] and not sessions[0]
    assert "Set-Cookie" not in client.get("/health").headers


def test_current_gives_the_context_objects_themselves_not_their_proxies(app):
    with app.test_request_context("/health"):
        found = (current.app(), current.request(), current.g())
        assert found == (app, flask_request._get_current_object(), g._get_current_object())
        assert not any(isinstance(obj, LocalProxy) for obj in found)  # a proxy would cost ~0.9 µs a read
    with pytest.raises(RuntimeError):
        current.request()
