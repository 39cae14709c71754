"""Storage test fixtures: a real S3 (moto's server on 127.0.0.1) and the backend under test.

Every test that takes ``storage`` runs once per backend (``local``, ``s3``) with a storage root / bucket
of its own, so "nothing was left behind" can be checked exactly with ``storage.keys()``.
"""

from __future__ import annotations

import io
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """moto's S3 server in a thread of the test process, on a free 127.0.0.1 port."""
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


S3_KEYS = {"accessKeyId": "testing", "secretAccessKey": "testing-secret"}


def s3_settings(endpoint: str, bucket: str) -> dict[str, Any]:
    return {"bucket": bucket, "region": "us-east-1", "endpointUrl": endpoint, **S3_KEYS}


@pytest.fixture(scope="session")
def s3_admin(s3_endpoint):
    """A boto3 client of the test S3 server, for set-up (buckets)."""
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        region_name="us-east-1",
        aws_access_key_id=S3_KEYS["accessKeyId"],
        aws_secret_access_key=S3_KEYS["secretAccessKey"],
    )


def make_bucket(client) -> str:
    bucket = f"trellis-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    return bucket


@pytest.fixture()
def s3_bucket_settings(s3_endpoint, s3_admin):
    """``s3_bucket_settings()`` → the ``s3`` config section of a new, empty bucket."""
    return lambda: s3_settings(s3_endpoint, make_bucket(s3_admin))


@dataclass
class Storage:
    """The backend a test runs against, and a way to see every blob it holds."""

    kind: str
    settings: dict[str, Any]
    app: Any

    def backend(self):
        from trellis_storage.placement import active_backend

        return active_backend()

    def keys(self) -> list[str]:
        """Every stored blob, temp files and unfinished multipart uploads included."""
        return self.backend().keys()

    def configure(self, **changes: Any) -> dict[str, Any]:
        return self.app.extensions["trellis"].configs.put("storage", changes)


@pytest.fixture(params=["local", "s3"])
def storage(request, app, db, tmp_path) -> Storage:
    """Storage configured for one backend (its own directory or bucket) inside the test's transaction."""
    if request.param == "local":
        settings = {"provider": "local", "local": {"path": str(tmp_path / "store")}}
    else:
        settings = {"provider": "s3", "s3": request.getfixturevalue("s3_bucket_settings")()}
    store = Storage(request.param, settings, app)
    store.configure(**settings)
    return store


@pytest.fixture()
def upload(client):
    """``upload(headers, content=b"…", filename="a.txt", **form)`` → the test client's response."""

    def send(headers: dict[str, str], content: bytes = b"hello world\n", filename: str = "hello.txt", **form: Any):
        data: dict[str, Any] = {"file": (io.BytesIO(content), filename)}
        data.update({k: (str(v).lower() if isinstance(v, bool) else v) for k, v in form.items()})
        return client.post("/storage/upload", data=data, headers=headers, content_type="multipart/form-data")

    return send


@pytest.fixture()
def png() -> bytes:
    """The start of a PNG (signature + IHDR): what content sniffing looks at."""
    return bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489") + b"\x00" * 64
