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

`--part resumable` (figures in `bench/results/storage_resumable.md`) measures resumable uploads and image variants:

- a 200 MB tus upload in 5 MB chunks (`PATCH /storage/uploads/{id}`) against one `POST /storage/upload` of
  the same file, in interleaved rounds: throughput ratio and the server's RSS growth during the tus upload
  (VmHWM reset before, read after);
- a 12-megapixel JPEG transformed to a 400 px WebP: the first (uncached) answer's latency (five widths
  400…404, each computed once); cached transforms against a plain download of a file holding the same bytes
  (wrk, 8 connections, interleaved 5 s rounds: the goal is ≥ 0.8×); and the p99 of small downloads (wrk, 4
  connections, 8 s) while ten large transforms (2000…4000 px JPEG, never cached: a new width each time) run
  from ten client threads, against the same without them, interleaved (goal: < 2×).
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

from bench.common import ROOT, Server, bench_server, wrk

RESULTS = ROOT / "bench" / "results" / "storage.md"
RESUMABLE_RESULTS = ROOT / "bench" / "results" / "storage_resumable.md"
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


# ------------------------------------------------------------------------------- resumable and images

TUS_SIZE = 200 * MB
TUS_CHUNK = 5 * MB
TUS_RSS_LIMIT_MB = 50
IMAGE_SIDE = (4000, 3000)  # 12 megapixels


def tus_upload(server: Server, headers: dict[str, str], path: Path) -> tuple[str, float]:
    """``path`` through tus in ``TUS_CHUNK`` chunks: (file id, seconds end to end, creation included)."""
    tus = {**headers, "Tus-Resumable": "1.0.0"}
    size = path.stat().st_size
    started = time.perf_counter()
    created = requests.post(
        f"{server.url}/storage/uploads",
        headers={**tus, "Upload-Length": str(size), "Upload-Metadata": "filename YmlnLmJpbg=="},
        timeout=60,
    )
    if created.status_code != 201:
        raise SystemExit(f"tus creation answered {created.status_code}: {created.text[:500]}")
    location = created.headers["Location"]
    offset = 0
    answer = created
    with requests.Session() as session, open(path, "rb") as source:
        while offset < size:
            chunk = source.read(TUS_CHUNK)
            answer = session.patch(
                location,
                data=chunk,
                headers={**tus, "Upload-Offset": str(offset), "Content-Type": "application/offset+octet-stream"},
                timeout=600,
            )
            if answer.status_code != 204:
                raise SystemExit(f"tus PATCH answered {answer.status_code}: {answer.text[:500]}")
            offset += len(chunk)
    return answer.headers["Trellis-File-Id"], time.perf_counter() - started


def forget(server: Server, headers: dict[str, str], *file_ids: str) -> None:
    for file_id in file_ids:
        requests.delete(f"{server.url}/storage/file/{file_id}", headers=headers, timeout=60).raise_for_status()


def run_tus(backend: str, database: str, repeat: int, big: Path, big_sha: str) -> dict[str, Any]:
    with bench_server(database, modules=MODULES) as server:
        moto = configure_s3(server) if backend == "s3" else None
        try:
            requests.put(
                f"{server.url}/admin/storage/config",
                json={"maxFileSize": 2 * TUS_SIZE},
                headers=server.admin_headers,
                timeout=60,
            ).raise_for_status()
            headers = make_user(server)
            warm_id, _ = tus_upload(server, headers, big)  # code paths loaded, then the baseline
            download(server, headers, warm_id, big_sha)
            forget(server, headers, warm_id)
            time.sleep(0.5)
            reset_peak(server)
            idle = server.rss_mb()
            tus_times, post_times, tus_peaks = [], [], []
            for _ in range(repeat):
                reset_peak(server)
                before = server.rss_mb()
                file_id, elapsed = tus_upload(server, headers, big)
                tus_peaks.append(server.peak_rss_mb() - before)
                tus_times.append(elapsed)
                download(server, headers, file_id, big_sha)
                post_id, elapsed = upload(server, headers, big)
                post_times.append(elapsed)
                forget(server, headers, file_id, post_id)  # moto keeps objects in memory: 200 MB each
        finally:
            if moto is not None:
                moto.stop()
    ratios = [p / t for t, p in zip(tus_times, post_times, strict=True)]  # tus throughput / POST throughput
    return {
        "rounds": repeat,
        "tus_mbps": round(TUS_SIZE / MB / statistics.median(tus_times), 1),
        "post_mbps": round(TUS_SIZE / MB / statistics.median(post_times), 1),
        "ratio": round(statistics.median(ratios), 2),
        "ratios": [round(r, 2) for r in ratios],
        "idle_mb": round(idle, 1),
        "growth_mb": round(max(tus_peaks), 1),
    }


def twelve_megapixels(folder: Path) -> Path:
    """A photo-like 12 MP JPEG: smooth shapes at every scale plus grain (a flat image would decode and encode
    unrealistically fast, pure noise would average out to a flat thumbnail)."""
    import random

    from PIL import Image, ImageChops

    width, height = IMAGE_SIDE
    rng = random.Random(32)
    layers = []
    for cells in (8, 40, 200):  # blobs of about 500, 100 and 20 px
        small = Image.frombytes("RGB", (cells, cells * 3 // 4), rng.randbytes(cells * (cells * 3 // 4) * 3))
        layers.append(small.resize((width, height), Image.Resampling.BICUBIC))
    image = Image.blend(Image.blend(layers[0], layers[1], 0.4), layers[2], 0.25)
    grain = Image.merge("RGB", [Image.effect_noise((width, height), 12)] * 3)
    image = ImageChops.add(image, grain, scale=1.0, offset=-128)
    path = folder / "photo.jpg"
    image.save(path, "JPEG", quality=90)
    return path


def run_images(database: str, repeat: int, folder: Path) -> dict[str, Any]:
    import threading

    photo = twelve_megapixels(folder)
    with bench_server(database, modules=MODULES) as server:
        headers = make_user(server)
        photo_id, _ = upload(server, headers, photo)
        thumb = "width=400&format=webp"
        firsts = []
        for width in range(400, 405):
            started = time.perf_counter()
            answer = requests.get(
                f"{server.url}/storage/download/{photo_id}?width={width}&format=webp", headers=headers, timeout=120
            )
            firsts.append(time.perf_counter() - started)
            answer.raise_for_status()
        variant = requests.get(f"{server.url}/storage/download/{photo_id}?{thumb}", headers=headers, timeout=60)
        same_bytes = folder / "thumb.webp"
        same_bytes.write_bytes(variant.content)
        plain_id, _ = upload(server, headers, same_bytes)

        cached_rps, plain_rps = [], []
        for _ in range(repeat):
            cached_rps.append(
                wrk(f"{server.url}/storage/download/{photo_id}?{thumb}", headers=headers, connections=8, duration=5)[
                    "rps"
                ]
            )
            plain_rps.append(
                wrk(f"{server.url}/storage/download/{plain_id}", headers=headers, connections=8, duration=5)["rps"]
            )

        widths = iter(range(2000, 4000))
        lock = threading.Lock()
        failed: list[str] = []

        def transform_loop(stop: threading.Event, done: list[float]) -> None:
            while not stop.is_set():
                with lock:
                    width = next(widths)
                started = time.perf_counter()
                answer = requests.get(
                    f"{server.url}/storage/download/{photo_id}?width={width}&format=jpeg", headers=headers, timeout=300
                )
                if answer.status_code != 200:
                    failed.append(f"{answer.status_code}: {answer.text[:200]}")
                    continue
                done.append(time.perf_counter() - started)

        quiet, busy, transform_s = [], [], []
        for _ in range(repeat):
            small = f"{server.url}/storage/download/{plain_id}"
            quiet.append(wrk(small, headers=headers, connections=4, duration=8)["p99_ms"])
            stop = threading.Event()
            threads = [threading.Thread(target=transform_loop, args=(stop, transform_s)) for _ in range(10)]
            for thread in threads:
                thread.start()
            time.sleep(1.0)  # all ten running
            busy.append(wrk(small, headers=headers, connections=4, duration=8)["p99_ms"])
            stop.set()
            for thread in threads:
                thread.join(300)
    return {
        "rounds": repeat,
        "source_bytes": photo.stat().st_size,
        "variant_bytes": len(variant.content),
        "first_ms": round(statistics.median(firsts) * 1000, 1),
        "first_all_ms": [round(f * 1000) for f in firsts],
        "cached_rps": round(statistics.median(cached_rps), 1),
        "plain_rps": round(statistics.median(plain_rps), 1),
        "cached_ratio": round(statistics.median([c / p for c, p in zip(cached_rps, plain_rps, strict=True)]), 2),
        "quiet_p99_ms": round(statistics.median(quiet), 1),
        "busy_p99_ms": round(statistics.median(busy), 1),
        "p99_ratio": round(statistics.median([b / q for b, q in zip(busy, quiet, strict=True)]), 2),
        "p99_pairs": list(zip(quiet, busy, strict=True)),
        "large_transforms": len(transform_s),
        "large_transform_s": round(statistics.median(transform_s), 2) if transform_s else None,
        "large_failed": failed[:3],
    }


def resumable_report(tus: dict[str, dict[str, Any]], images: dict[str, Any] | None, database: str, command: str) -> str:
    load = os.getloadavg()
    lines = [
        "| backend | rounds | tus MB/s | POST MB/s | tus / POST (median of paired rounds) | rounds | server RSS growth (MiB) |",
        "|---|---:|---:|---:|---:|---|---:|",
    ]
    for backend, r in tus.items():
        lines.append(
            f"| {backend} | {r['rounds']} | {r['tus_mbps']} | {r['post_mbps']} | {r['ratio']}× | "
            f"{', '.join(map(str, r['ratios']))} | {r['growth_mb']} |"
        )
    tus_ok = all(r["growth_mb"] < TUS_RSS_LIMIT_MB for r in tus.values())
    text = f"""# Storage benchmark: resumable uploads and image transforms

Command: `{command}`

One Trellis server process (eventlet; {database} database), client on the same machine; see the docstring of
`bench/storage_bench.py` for the method. MB = 10^6 bytes.

## tus upload of {TUS_SIZE // MB} MB in {TUS_CHUNK // MB} MB chunks against one `POST /storage/upload`

{chr(10).join(lines)}

Server RSS growth during a tus upload under {TUS_RSS_LIMIT_MB} MiB: **{"yes" if tus_ok else "NO"}**.
"""
    if images is not None:
        i = images
        text += f"""
## 12-megapixel JPEG ({i["source_bytes"] // 1000} kB) → 400 px WebP ({i["variant_bytes"]} bytes)

| measure | value |
|---|---:|
| first (uncached) answer, median of 5 widths (ms) | {i["first_ms"]} ({", ".join(map(str, i["first_all_ms"]))}) |
| cached transform req/s (wrk, 8 connections) | {i["cached_rps"]} |
| plain download of the same bytes req/s | {i["plain_rps"]} |
| cached / plain (median of {i["rounds"]} interleaved rounds; goal ≥ 0.8) | **{i["cached_ratio"]}×** |
| small download p99 alone (ms) | {i["quiet_p99_ms"]} |
| small download p99 while ten large transforms run (ms) | {i["busy_p99_ms"]} |
| busy / alone (median of {i["rounds"]} interleaved rounds; goal < 2) | **{i["p99_ratio"]}×** |
| large transforms completed meanwhile, median seconds each | {i["large_transforms"]}, {i["large_transform_s"]} |
| large transforms that failed (the first three) | {i["large_failed"] or "none"} |
"""
    text += f"""
Machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}; client, server and
database share the machine (load average before writing: {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f}; other
work was running on the machine).
"""
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["local", "s3", "both"], default="both")
    parser.add_argument("--database", choices=["postgresql", "sqlite"], default="postgresql")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--part", choices=["transfer", "resumable"], default="transfer")
    parser.add_argument("--no-images", action="store_true", help="resumable: the tus part only")
    parser.add_argument("--no-tus", action="store_true", help="resumable: the image part only")
    parser.add_argument("--no-write", action="store_true", help="print the figures, do not update results/storage.md")
    args = parser.parse_args()
    backends = ["local", "s3"] if args.backend == "both" else [args.backend]
    if args.part == "resumable":
        with tempfile.TemporaryDirectory(prefix="trellis-storage-bench-") as tmp:
            folder = Path(tmp)
            tus = {}
            if not args.no_tus:
                big, big_sha = random_file(folder, "big.bin", TUS_SIZE)
                tus = {backend: run_tus(backend, args.database, args.repeat, big, big_sha) for backend in backends}
                big.unlink()
            images = None if args.no_images else run_images(args.database, args.repeat, folder)
        command = (".venv/bin/python -m bench.storage_bench " + " ".join(sys.argv[1:])).strip()
        text = resumable_report(tus, images, args.database, command)
        print(text)
        if not args.no_write:
            RESUMABLE_RESULTS.write_text(text)
        return
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
