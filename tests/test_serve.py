"""The server entry point sets TCP_NODELAY on every accepted connection (Socket.IO acks otherwise wait
~40 ms for Nagle's algorithm; bench/results/chat_nodelay.md)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
import requests

from trellis.server.serve import NoDelayListener, nodelay_enabled
from trellis.testing.plugin import live_server_env


def test_accepted_connections_have_nodelay():
    with socket.create_server(("127.0.0.1", 0)) as server:
        listener = NoDelayListener(server)
        assert listener.getsockname() == server.getsockname()  # everything else is the wrapped socket's
        accepted = []
        for _ in range(2):
            with socket.create_connection(server.getsockname()):
                connection, _address = listener.accept()
                with connection:
                    accepted.append(connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
    assert accepted and all(accepted)
    with socket.create_server(("127.0.0.1", 0)) as plain, socket.create_connection(plain.getsockname()):
        connection, _ = plain.accept()
        with connection:
            assert connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0  # what it fixes


@pytest.mark.parametrize(("value", "enabled"), [(None, True), ("1", True), ("0", False), ("off", False)])
def test_nodelay_setting(monkeypatch, value, enabled):
    if value is None:
        monkeypatch.delenv("TRELLIS_TCP_NODELAY", raising=False)
    else:
        monkeypatch.setenv("TRELLIS_TCP_NODELAY", value)
    assert nodelay_enabled() is enabled


@pytest.mark.live
def test_a_second_server_on_a_used_port_exits_naming_the_port(live_server, app_config, tmp_path):
    # eventlet's listen() sets SO_REUSEPORT: the second process used to start, and the kernel split the
    # connections between the two.
    second = subprocess.run(
        [sys.executable, "-m", "trellis.testing.server"],
        env=live_server_env(app_config, tmp_path, live_server.port),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode == 1
    assert second.stderr.strip().splitlines()[-1] == (
        f"Trellis cannot serve on 127.0.0.1:{live_server.port}: the port is already in use"
    )
    assert "Traceback" not in second.stderr
    assert requests.get(f"{live_server.url}/health", timeout=30).status_code == 200


def test_a_serving_process_leaves_its_start_up_heap_out_of_the_garbage_collectors_passes(live_server, admin_headers):
    """``serve`` freezes what start-up made (``freeze_start_up_heap``): a full collection over it paused the
    process ~90–175 ms. The real server's /metrics tells how many objects it froze."""
    from prometheus_client.parser import text_string_to_metric_families

    response = requests.get(f"{live_server.url}/metrics", headers=admin_headers, timeout=30)
    assert response.status_code == 200, response.text
    found = {family.name: family for family in text_string_to_metric_families(response.text)}
    frozen = found["trellis_gc_frozen_objects"].samples[0].value
    assert frozen > 50_000, frozen  # the app's modules and objects, not a handful


def test_the_live_server_factory_takes_another_port_when_its_own_was_taken_meanwhile(
    live_server, live_server_factory, monkeypatch
):
    """``free_port()`` only finds a port free; another test process may bind it first (seen in CI). The
    factory then starts its server on another port instead of failing the test."""
    from trellis.testing import plugin

    ports = iter([live_server.port])  # taken: the first attempt must fail and be retried
    real = plugin.free_port
    monkeypatch.setattr(plugin, "free_port", lambda: next(ports, None) or real())
    second = live_server_factory()
    assert second.port != live_server.port
    assert requests.get(f"{second.url}/health", timeout=30).status_code == 200
    assert requests.get(f"{live_server.url}/health", timeout=30).status_code == 200


@pytest.mark.long
def test_a_forked_server_and_a_started_one_end_alike(live_server_factory, monkeypatch):
    """Test servers are forked from a process that imported Trellis already (``trellis.testing.forkserver``);
    ``TRELLIS_TEST_FORK=0`` starts them from nothing. Both serve, and end the same way on SIGTERM and SIGKILL."""
    import signal
    import subprocess

    from trellis.testing.forkserver import ForkedProcess

    forked = [live_server_factory(), live_server_factory()]
    monkeypatch.setenv("TRELLIS_TEST_FORK", "0")
    started = [live_server_factory(), live_server_factory()]
    assert [type(server.process) for server in forked + started] == [ForkedProcess] * 2 + [subprocess.Popen] * 2
    for server in forked + started:
        assert requests.get(f"{server.url}/health", timeout=30).status_code == 200
    ends = []
    for servers in (forked, started):
        servers[0].process.terminate()
        servers[1].process.kill()
        ends.append([server.process.wait(30) for server in servers])
    assert ends[0] == ends[1]
    assert ends[0][1] == -signal.SIGKILL
