"""Storage: upload and download of a 50 MB file, throughput and peak server memory.

    .venv/bin/python -m bench.storage_bench                          # local disk and S3 (moto), 3 rounds each
    .venv/bin/python -m bench.storage_bench --backend local --repeat 1 --no-write

One Trellis server process (eventlet, `python -m trellis.testing.server`, modules authentication and
storage) on a throwaway PostgreSQL database. A user is created through the API; a small warm-up file is
uploaded and downloaded (so code paths and libraries are loaded), then the server's resident memory is
read as "idle". Each round uploads a 50 MB file of random bytes (`POST /storage/upload`, multipart with a
Content-Length, streamed from disk by the client) and downloads it again (`GET /storage/download/{id}`,
read in 1 MiB chunks and hashed), each timed end to end by the client. The server's peak resident memory
(VmHWM from /proc, the high-water mark since it started) is read at the end; "peak above idle" is that
peak minus the idle figure, so it also counts any start-up peak and can only overstate.

For S3, moto's server runs in this client process on 127.0.0.1 (`ThreadedMotoServer`), so S3 figures
include moto's own cost on the same two cores; they show that memory stays flat, not what AWS would do.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import socket
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, BinaryIO

import requests

from bench.common import ROOT, Server, bench_server

RESULTS = ROOT / "bench" / "results" / "storage.md"
MODULES = "authentication,email,sms,storage"
MB = 1_000_000
SIZE = 50 * MB
LIMIT_MB = 100  # the bound on peak memory above idle


class MultipartBody:
    """A multipart/form-data body streamed from a file, with a known length (so no chunked encoding)."""

    def __init__(self, path: Path, filename: str) -> None:
        self.boundary = uuid.uuid4().hex
        self._head = (
            f"--{self.boundary}\r\n"
            f'Content-Disposition: form-data; name="file"; filename="{filename}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        self._tail = f"\r\n--{self.boundary}--\r\n".encode()
        self._file: BinaryIO = open(path, "rb")
        self._length = len(self._head) + path.stat().st_size + len(self._tail)
        self._parts = [self._head]

    def __len__(self) -> int:
        return self._length

    def read(self, size: int = -1) -> bytes:
        out = b""
        while self._parts or self._file:
            if self._parts:
                out += self._parts.pop(0)
            else:
                chunk = self._file.read(max(size - len(out), 0) if size > 0 else -1)
                if not chunk:
                    self._file.close()
                    self._file = None  # type: ignore[assignment]
                    self._parts.append(self._tail)
                    continue
                out += chunk
            if 0 < size <= len(out):
                break
        return out

    @property
    def content_type(self) -> str:
        return f"multipart/form-data; boundary={self.boundary}"


def make_user(server: Server) -> dict[str, str]:
    email, password = f"bench-{uuid.uuid4().hex[:8]}@example.com", "bench-password-long-enough"
    body = {"email": email, "password": password}
    requests.post(
        f"{server.url}/authentication/users", json=body, headers=server.admin_headers, timeout=60
    ).raise_for_status()
    tokens = requests.post(f"{server.url}/authentication/local", json=body, timeout=60)
    tokens.raise_for_status()
    return {"Authorization": f"Bearer {tokens.json()['accessToken']}"}


def upload(server: Server, headers: dict[str, str], path: Path) -> tuple[str, float]:
    body = MultipartBody(path, path.name)
    started = time.perf_counter()
    response = requests.post(
        f"{server.url}/storage/upload",
        data=body,
        headers={**headers, "Content-Type": body.content_type},
        timeout=600,
    )
    elapsed = time.perf_counter() - started
    if response.status_code != 201:
        raise SystemExit(f"upload answered {response.status_code}: {response.text[:500]}")
    return response.json()["id"], elapsed


def download(server: Server, headers: dict[str, str], file_id: str, expected: str) -> float:
    digest = hashlib.sha256()
    started = time.perf_counter()
    with requests.get(
        f"{server.url}/storage/download/{file_id}", headers=headers, stream=True, timeout=600
    ) as response:
        response.raise_for_status()
        for chunk in response.iter_content(1024 * 1024):
            digest.update(chunk)
    elapsed = time.perf_counter() - started
    if digest.hexdigest() != expected:
        raise SystemExit("downloaded bytes differ from the uploaded ones")
    return elapsed


def random_file(folder: Path, name: str, size: int) -> tuple[Path, str]:
    path = folder / name
    digest = hashlib.sha256()
    with open(path, "wb") as out:
        left = size
        while left:
            chunk = os.urandom(min(left, 4 * 1024 * 1024))
            digest.update(chunk)
            out.write(chunk)
            left -= len(chunk)
    return path, digest.hexdigest()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def configure_s3(server: Server) -> Any:
    """Start moto's S3 on 127.0.0.1, make a bucket, point the storage config at it."""
    import boto3
    from moto.server import ThreadedMotoServer

    port = _free_port()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    moto.start()
    endpoint = f"http://127.0.0.1:{port}"
    keys = {"aws_access_key_id": "bench", "aws_secret_access_key": "bench-secret"}
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **keys).create_bucket(Bucket="bench")
    s3 = {
        "bucket": "bench",
        "region": "us-east-1",
        "endpointUrl": endpoint,
        "accessKeyId": "bench",
        "secretAccessKey": "bench-secret",
    }
    response = requests.put(
        f"{server.url}/admin/storage/config",
        json={"provider": "s3", "s3": s3},
        headers=server.admin_headers,
        timeout=60,
    )
    response.raise_for_status()
    return moto


def reset_peak(server: Server) -> bool:
    """Reset the process's VmHWM (Linux: ``5`` into /proc/<pid>/clear_refs), so the peak read at the end
    is the peak of the transfers alone. False if the kernel refuses (then the peak includes start-up)."""
    try:
        Path(f"/proc/{server.process.pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return server.peak_rss_mb() <= server.rss_mb() + 1


def run(backend: str, database: str, repeat: int, folder: Path, big: Path, big_sha: str) -> dict[str, Any]:
    with bench_server(database, modules=MODULES) as server:
        moto = configure_s3(server) if backend == "s3" else None
        try:
            headers = make_user(server)
            small, small_sha = random_file(folder, "warm-up.bin", 1 * MB)
            warm_id, _ = upload(server, headers, small)
            download(server, headers, warm_id, small_sha)
            time.sleep(0.5)
            startup_peak = server.peak_rss_mb()  # argon2 (user creation, sign-in) peaks here, not transfers
            reset = reset_peak(server)
            idle = server.rss_mb()
            ups, downs, rss_after = [], [], []
            for _ in range(repeat):
                file_id, up = upload(server, headers, big)
                ups.append(up)
                downs.append(download(server, headers, file_id, big_sha))
                rss_after.append(server.rss_mb())
            peak = server.peak_rss_mb()
        finally:
            if moto is not None:
                moto.stop()
    up_s, down_s = statistics.median(ups), statistics.median(downs)
    return {
        "rounds": repeat,
        "upload_s": round(up_s, 2),
        "upload_mbps": round(SIZE / MB / up_s, 1),
        "download_s": round(down_s, 2),
        "download_mbps": round(SIZE / MB / down_s, 1),
        "idle_mb": round(idle, 1),
        "rss_after_mb": round(max(rss_after), 1),
        "startup_peak_mb": round(startup_peak, 1),
        "peak_reset": reset,
        "peak_mb": round(peak, 1),
        "peak_above_idle_mb": round(peak - idle, 1),
    }


def report(results: dict[str, dict[str, Any]], database: str, command: str) -> str:
    load = os.getloadavg()
    lines = [
        "| backend | rounds | upload (s) | upload MB/s | download (s) | download MB/s | idle RSS (MiB) "
        "| RSS after (MiB) | transfer peak RSS (MiB) | peak above idle (MiB) | start-up peak (MiB) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for backend, r in results.items():
        lines.append(
            f"| {backend} | {r['rounds']} | {r['upload_s']} | {r['upload_mbps']} | {r['download_s']} | "
            f"{r['download_mbps']} | {r['idle_mb']} | {r['rss_after_mb']} | {r['peak_mb']}{'' if r['peak_reset'] else ' (not reset)'} "
            f"| {r['peak_above_idle_mb']} | {r['startup_peak_mb']} |"
        )
    verdict = all(r["peak_above_idle_mb"] < LIMIT_MB for r in results.values())
    return f"""# Storage benchmark

Command: `{command}`

Upload and download of one {SIZE // MB} MB file (random bytes; MB = 10^6 bytes) through one Trellis server
process (eventlet; modules authentication and storage; {database} database), timed end to end by a
client on the same machine; medians over the rounds. Upload is `POST /storage/upload` (multipart with a
Content-Length, streamed from disk); download is `GET /storage/download/{{id}}` read in 1 MiB chunks and
checked against the upload's SHA-256. Memory is the server process's resident set from /proc: "idle"
after a 1 MB warm-up upload and download; then the high-water mark (VmHWM) is reset (`5` into
/proc/<pid>/clear_refs) and "peak" is VmHWM after the rounds: the most the transfers ever held. The
"start-up peak" column is VmHWM before that reset: it comes from argon2 hashing the benchmark user's
password (creation and sign-in; 64 MiB of memory cost by design), not from storage.

{chr(10).join(lines)}

Peak server memory above idle stays under {LIMIT_MB} MiB: **{"yes" if verdict else "NO"}**.

How the bytes flow: werkzeug's multipart parser spools the file part to a temporary file (never to
memory above 500 kB); the upload then streams it in 1 MiB chunks into the backend (local: a temp file in
the target directory, fsync, rename; S3: 8 MiB multipart parts) while hashing and sniffing it. Downloads
are a generator of 256 KiB chunks read from the file or from boto3's StreamingBody. The S3 rows include
moto's server running inside the benchmark client on the same cores.

Machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}; client, server,
database (and moto) share the machine (load average before writing: {load[0]:.1f}, {load[1]:.1f},
{load[2]:.1f}; other work was running on the machine).
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["local", "s3", "both"], default="both")
    parser.add_argument("--database", choices=["postgresql", "sqlite"], default="postgresql")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print the figures, do not update results/storage.md")
    args = parser.parse_args()
    backends = ["local", "s3"] if args.backend == "both" else [args.backend]
    with tempfile.TemporaryDirectory(prefix="trellis-storage-bench-") as tmp:
        folder = Path(tmp)
        big, big_sha = random_file(folder, "big.bin", SIZE)
        results = {backend: run(backend, args.database, args.repeat, folder, big, big_sha) for backend in backends}
    command = (".venv/bin/python -m bench.storage_bench " + " ".join(sys.argv[1:])).strip()
    text = report(results, args.database, command)
    print(text)
    if not args.no_write:
        RESULTS.write_text(text)
    if not all(r["peak_above_idle_mb"] < LIMIT_MB for r in results.values()):
        raise SystemExit(f"peak server memory above idle exceeded {LIMIT_MB} MiB")


if __name__ == "__main__":
    main()
