"""Functions test helpers: real servers started on a folder of functions files the test writes, and the
REST calls the tests make."""

from __future__ import annotations

import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from trellis.testing.plugin import TEST_MASTER_KEY, LiveServer

ADMIN = {"masterkey": TEST_MASTER_KEY}
WAIT = 15.0


class Folder:
    """The functions folder of a test: ``write(name, source)`` (dedented), ``remove(name)``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)

    def write(self, name: str, source: str) -> None:
        target = self.path / name
        temporary = target.with_suffix(".tmp")
        temporary.write_text(textwrap.dedent(source))
        temporary.replace(target)  # a reload never reads half a file

    def remove(self, name: str) -> None:
        (self.path / name).unlink()


@pytest.fixture()
def folder(tmp_path: Path) -> Folder:
    return Folder(tmp_path / "functions")


@pytest.fixture()
def start(live_server_factory, folder: Folder) -> Callable[..., LiveServer]:
    """``start(**env)``: a real server on the test's functions folder."""

    def make(**env: str) -> LiveServer:
        return live_server_factory(TRELLIS_FUNCTIONS_PATH=str(folder.path), **env)

    return make


class Api:
    def __init__(self, url: str) -> None:
        self.url = url
        self.http = requests.Session()

    def schema(self, fields: dict[str, Any], name: str | None = None, **options: Any) -> str:
        name = name or "Fn" + uuid.uuid4().hex[:8]
        body = {"name": name, "fields": fields, **options}
        response = self.http.post(f"{self.url}/admin/database/schemas", json=body, headers=ADMIN, timeout=WAIT)
        assert response.status_code == 201, response.text
        return name

    def call(self, method: str, path: str, expect: int | None = None, headers: dict[str, str] = ADMIN, **kwargs: Any):
        response = self.http.request(method, f"{self.url}{path}", headers=headers, timeout=WAIT, **kwargs)
        if expect is not None:
            assert response.status_code == expect, response.text
        return response

    def documents(self, schema: str) -> list[dict[str, Any]]:
        return self.call("GET", f"/database/{schema}?limit=1000", 200).json()["documents"]

    def log(self, **params: Any) -> list[dict[str, Any]]:
        return self.call("GET", "/admin/functions/log", 200, params=params).json()["entries"]


def eventually(check: Callable[[], Any], seconds: float = WAIT) -> Any:
    """``check()``'s first truthy answer within ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds} s: {check}")
        time.sleep(0.05)


@pytest.fixture()
def api_of() -> Iterator[Callable[[LiveServer], Api]]:
    yield lambda server: Api(server.url)
