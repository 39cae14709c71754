"""The browser bundle of the client SDK (``dist/trellis.browser.js``) in headless Chromium, against a live server.

The server serves no static files, so a small HTTP server on 127.0.0.1 (another port: another origin) serves
a page that imports ``Trellis`` from the bundle with ``<script type="module">``, as a page without a bundler
would; the live server allows exactly that origin (``TRELLIS_CORS_ORIGINS``), for HTTP and Socket.IO alike.
The tests drive the page's client through ``page.evaluate``: sign-up and sign-in (the session in
localStorage), a list, a subscription receiving another user's changes, a 10 MiB tus upload cut halfway and
resumed, and a transformed image shown in an ``<img>``. Every test fails on an uncaught error or a console
error in the page, but for the one request the upload test cuts on purpose."""

from __future__ import annotations

import array
import base64
import hashlib
import io
import json
import re
import shutil
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlencode

import pytest
import requests

from trellis.testing.browser import browser_page, watch_problems
from trellis.testing.plugin import TEST_MASTER_KEY, LiveServer, running_servers
from trellis_authentication.testing import create_user_over_http

from .js_sdk import Built, needs_node, sdk  # noqa: F401  (sdk: the fixture)

pytestmark = [pytest.mark.browser, pytest.mark.live, pytest.mark.long, needs_node]

TIMEOUT = 30_000  # ms: the machine may be running both databases' passes
MiB = 1024 * 1024
ADMIN = {"masterkey": TEST_MASTER_KEY}
PASSWORD = "correct-horse-battery-staple"

PAGE = """<!doctype html>
<html>
<head>
<meta charset="utf-8">
<title>trellis-client in a browser</title>
<link rel="icon" href="data:,">
<script type="module" src="page.js"></script>
</head>
<body></body>
</html>
"""

# The page's own script: a client of the server named by ?api=, and a seeded pattern of bytes to upload that
# Python computes too (each little-endian 32-bit word is MurmurHash3's finaliser of seed + its index).
PAGE_SCRIPT = """import { Trellis } from "./trellis.browser.js";

window.t = new Trellis(new URLSearchParams(location.search).get("api"));

window.pattern = (size, seed) => {
  const bytes = new Uint8Array(size);
  const words = new DataView(bytes.buffer);
  for (let i = 0; i < size / 4; i += 1) {
    let x = (seed + i) >>> 0;
    x ^= x >>> 16;
    x = Math.imul(x, 0x85ebca6b);
    x ^= x >>> 13;
    x = Math.imul(x, 0xc2b2ae35);
    x ^= x >>> 16;
    words.setUint32(4 * i, x >>> 0, true);
  }
  return bytes;
};

window.sha256 = async (blob) =>
  [...new Uint8Array(await crypto.subtle.digest("SHA-256", await blob.arrayBuffer()))]
    .map((byte) => byte.toString(16).padStart(2, "0"))
    .join("");

document.documentElement.dataset.ready = "";
"""


def pattern(size: int, seed: int) -> bytes:
    """The bytes ``window.pattern(size, seed)`` makes in the page."""
    words = array.array("I", bytes(size))
    assert words.itemsize == 4 and len(words) == size // 4
    mask = 0xFFFFFFFF
    for i in range(size // 4):
        x = (seed + i) & mask
        x ^= x >> 16
        x = (x * 0x85EBCA6B) & mask
        x ^= x >> 13
        x = (x * 0xC2B2AE35) & mask
        x ^= x >> 16
        words[i] = x
    if sys.byteorder == "big":
        words.byteswap()
    return words.tobytes()


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def site(sdk: Built, tmp_path_factory) -> Iterator[str]:  # noqa: F811
    """The origin serving the page and the bundle: another port than the server's."""
    folder = tmp_path_factory.mktemp("js-client-page")
    (folder / "index.html").write_text(PAGE)
    (folder / "page.js").write_text(PAGE_SCRIPT)
    for name in ("trellis.browser.js", "trellis.browser.js.map"):
        shutil.copy(sdk.folder / "dist" / name, folder / name)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(folder)))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, name="js-client-page", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


@pytest.fixture(scope="module")
def server(app, app_config, site: str, tmp_path_factory) -> Iterator[LiveServer]:
    """One live server for the module, allowing the page's origin and no other."""
    with running_servers(app, app_config, tmp_path_factory.mktemp("js-client-browser")) as start:
        yield start(TRELLIS_CORS_ORIGINS=site)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with browser_page() as page:
        page.set_default_timeout(TIMEOUT)
        yield page


@dataclass
class AppPage:
    page: Any
    api: str  # the live server's URL
    console_errors: list[str] = field(default_factory=list)

    def run(self, script: str, arg: Any = None) -> Any:
        return self.page.evaluate(script, arg)

    def session(self) -> dict[str, Any] | None:
        """The session the SDK keeps in localStorage."""
        stored = self.run("key => localStorage.getItem(key)", f"trellis:{self.api}:session")
        return None if stored is None else json.loads(stored)

    def sign_up(self) -> str:
        email = f"page-{uuid.uuid4().hex[:10]}@example.com"
        result = self.run("([email, password]) => t.auth.signUp(email, password)", [email, PASSWORD])
        assert result["signedIn"] is True and result["user"]["email"] == email
        return email


@pytest.fixture()
def app_page(browser: Any, site: str, server: LiveServer) -> Iterator[AppPage]:
    """The page, loaded afresh with an empty localStorage; at the end, no error in it."""
    opened = AppPage(browser, server.url)

    def on_console(message: Any) -> None:
        if message.type == "error":
            opened.console_errors.append(message.text)

    browser.on("console", on_console)
    try:
        with watch_problems(browser) as problems:
            address = f"{site}/?{urlencode({'api': server.url})}"
            browser.goto(address)
            browser.evaluate("localStorage.clear()")
            browser.goto(address)  # a new client, reading the empty storage
            browser.wait_for_selector("html[data-ready]", state="attached")
            yield opened
        assert problems == []
    finally:
        browser.remove_listener("console", on_console)
    assert opened.console_errors == []


def create_schema(url: str, fields: dict[str, Any]) -> str:
    name = f"Note{uuid.uuid4().hex[:8]}"
    created = requests.post(
        f"{url}/admin/database/schemas", json={"name": name, "fields": fields}, headers=ADMIN, timeout=30
    )
    assert created.status_code == 201, created.text
    return name


def test_sign_in_list_and_receive_another_users_changes(app_page: AppPage) -> None:
    url = app_page.api
    schema = create_schema(url, {"title": {"type": "String", "required": True}, "rank": "Number"})
    writer = create_user_over_http(url)

    # 1. Sign up, out and in: the tokens live in localStorage, and they are the server's.
    assert app_page.session() is None
    email = app_page.sign_up()
    signed_up = app_page.session()
    assert signed_up is not None
    app_page.run("t.auth.signOut()")
    assert app_page.session() is None and app_page.run("t.auth.user") is None
    result = app_page.run("([email, password]) => t.auth.signIn(email, password)", [email, PASSWORD])
    assert result["twoFactor"] is False and result["user"]["email"] == email
    session = app_page.session()
    assert session is not None
    assert session["userId"] == result["user"]["_id"] == signed_up["userId"]
    assert session["accessToken"] and session["refreshToken"] and session["refreshToken"] != signed_up["refreshToken"]
    me = requests.get(
        f"{url}/authentication/user", headers={"Authorization": f"Bearer {session['accessToken']}"}, timeout=30
    )
    assert me.status_code == 200 and me.json()["email"] == email, me.text

    # 2. A list of documents another user wrote.
    for title, rank in (("second", 2), ("first", 1)):
        created = requests.post(
            f"{url}/database/{schema}", json={"title": title, "rank": rank}, headers=writer.headers, timeout=30
        )
        assert created.status_code == 201, created.text
    listed = app_page.run(
        "schema => t.collection(schema).list({ sort: 'rank', count: true })",
        schema,
    )
    assert listed["count"] == 2
    assert [(doc["title"], doc["rank"]) for doc in listed["documents"]] == [("first", 1), ("second", 2)]

    # 3. A subscription in the page; the changes are made from here, by the other user and the admin.
    app_page.run(
        """async (schema) => {
          window.changes = [];
          const unsubscribe = t.collection(schema).subscribe({}, (change) => window.changes.push(change));
          await unsubscribe.ready;
          window.unsubscribe = unsubscribe;
        }""",
        schema,
    )
    # Socket.IO over a WebSocket (the SDK's first choice): its origin check let the page's origin in.
    assert app_page.run("t.realtime.socket?.connected === true")
    created = requests.post(
        f"{url}/database/{schema}", json={"title": "live", "rank": 3}, headers=writer.headers, timeout=30
    )
    assert created.status_code == 201, created.text
    document = created.json()
    updated = requests.patch(
        f"{url}/database/{schema}/{document['_id']}", json={"rank": 4}, headers=writer.headers, timeout=30
    )
    assert updated.status_code == 200, updated.text
    deleted = requests.delete(f"{url}/database/{schema}/{document['_id']}", headers=ADMIN, timeout=30)
    assert deleted.status_code == 200, deleted.text
    app_page.page.wait_for_function("window.changes.length >= 3")
    changes = app_page.run("window.changes")
    assert [(change["event"], change["schema"]) for change in changes] == [
        ("create", schema),
        ("update", schema),
        ("delete", schema),
    ]
    assert changes[0]["document"] == document
    assert changes[1]["document"] == updated.json()
    assert changes[2]["document"] == {"_id": document["_id"]}
    assert changes[0]["eventId"] < changes[1]["eventId"] < changes[2]["eventId"]
    app_page.run("window.unsubscribe()")
    assert app_page.run("t.realtime.socket") is None  # the last subscription closed the connection


def test_a_10_mib_upload_cut_halfway_resumes_where_the_server_stopped(app_page: AppPage) -> None:
    """tus in chunks of 2 MiB: the PATCH sent once 6 MiB (60 %) were stored is cut (its connection reset, as a
    dropped network would); the SDK retries on its own: a HEAD asks the server its offset, 6 MiB, and the
    upload goes on from there. One upload resource, the first 6 MiB never sent twice, the same bytes."""
    size, seed = 10 * MiB, 0x5EED
    expected = hashlib.sha256(pattern(size, seed)).hexdigest()
    app_page.sign_up()
    page = app_page.page

    sent: list[tuple[str, int | None]] = []  # the tus requests: method, Upload-Offset
    answered: list[tuple[str, int, int | None]] = []  # method, status, Upload-Offset
    failed: list[tuple[str, int | None, str | None]] = []
    cut: list[int] = []

    def offset(headers: dict[str, str]) -> int | None:
        value = headers.get("upload-offset")
        return None if value is None else int(value)

    def tus(request: Any) -> bool:
        return "/storage/uploads" in request.url and request.method != "OPTIONS"

    def on_request(request: Any) -> None:
        if tus(request):
            sent.append((request.method, offset(request.headers)))

    def on_response(response: Any) -> None:
        if tus(response.request):
            answered.append((response.request.method, response.status, offset(response.headers)))

    def on_failed(request: Any) -> None:
        if tus(request):
            failed.append((request.method, offset(request.headers), request.failure))

    def cut_once(route: Any) -> None:
        request = route.request
        at = offset(request.headers)
        if request.method == "PATCH" and at is not None and at >= size // 2 and not cut:
            cut.append(at)
            route.abort("connectionreset")
        else:
            route.continue_()

    # Routing makes Playwright answer the CORS preflights itself: only the upload's own URL is routed, and
    # only while it runs.
    uploads = re.compile(r"/storage/uploads/[^/?]+$")
    page.on("request", on_request)
    page.on("response", on_response)
    page.on("requestfailed", on_failed)
    page.route(uploads, cut_once)
    try:
        result = app_page.run(
            """async ([size, seed]) => {
              const blob = new Blob([pattern(size, seed)], { type: "application/octet-stream" });
              const key = `trellis:${t.url}:uploads`;
              const progress = [];
              let addressKept = false;
              const file = await t.storage.upload(blob, {
                name: "pattern.bin",
                onProgress: (sent, total) => {
                  progress.push([sent, total]);
                  addressKept ||= localStorage.getItem(key) !== null;
                },
              });
              return { file, sha256: await sha256(blob), progress, addressKept, addressLeft: localStorage.getItem(key) };
            }""",
            [size, seed],
        )
    finally:
        page.unroute(uploads)
        page.remove_listener("request", on_request)
        page.remove_listener("response", on_response)
        page.remove_listener("requestfailed", on_failed)

    # The cut, and the one console error it makes.
    assert cut == [6 * MiB]
    assert failed == [("PATCH", 6 * MiB, "net::ERR_CONNECTION_RESET")], failed
    expected_error = "Failed to load resource: net::ERR_CONNECTION_RESET"
    assert app_page.console_errors.count(expected_error) == 1, app_page.console_errors
    app_page.console_errors.remove(expected_error)

    # The resume: one upload resource; after the cut a HEAD, answered with the 6 MiB the server kept, and
    # PATCHes from there on.
    assert sent == [
        ("POST", None),
        ("PATCH", 0),
        ("PATCH", 2 * MiB),
        ("PATCH", 4 * MiB),
        ("PATCH", 6 * MiB),  # cut
        ("HEAD", None),
        ("PATCH", 6 * MiB),
        ("PATCH", 8 * MiB),
    ], sent
    assert answered == [
        ("POST", 201, 0),
        ("PATCH", 204, 2 * MiB),
        ("PATCH", 204, 4 * MiB),
        ("PATCH", 204, 6 * MiB),
        ("HEAD", 200, 6 * MiB),
        ("PATCH", 204, 8 * MiB),
        ("PATCH", 204, 10 * MiB),
    ], answered
    assert result["addressKept"] is True  # the SDK kept the upload's address for resuming (localStorage)
    assert result["addressLeft"] is None  # and forgot it once finished
    assert result["progress"][-1] == [size, size]
    assert max(sent for sent, _ in result["progress"][:-1]) >= size // 2  # progress passed 50 % before the end

    # The bytes: the page's, Python's and the stored file's are the same.
    file = result["file"]
    assert result["sha256"] == expected
    assert (file["size"], file["displayName"], file["sha256"]) == (size, "pattern.bin", expected)
    session = app_page.session()
    assert session is not None
    download = requests.get(
        f"{app_page.api}/storage/download/{file['_id']}",
        headers={"Authorization": f"Bearer {session['accessToken']}"},
        stream=True,
        timeout=60,
    )
    assert download.status_code == 200, download.text
    digest = hashlib.sha256()
    for chunk in download.iter_content(1 << 20):
        digest.update(chunk)
    assert digest.hexdigest() == expected


def test_a_transformed_image_shows_in_an_img(app_page: AppPage) -> None:
    """A PNG made here, uploaded by the page; ``t.storage.url(id, {width: 40, format: "webp"})`` (a signed URL:
    the file is private) as an ``<img src>`` loads a 40-pixel-wide WebP."""
    from PIL import Image

    picture = io.BytesIO()
    Image.new("RGB", (120, 90), (30, 120, 200)).save(picture, format="PNG")
    app_page.sign_up()
    shown = app_page.run(
        """async (png) => {
          const bytes = Uint8Array.from(atob(png), (c) => c.charCodeAt(0));
          const file = await t.storage.upload(new Blob([bytes], { type: "image/png" }), { name: "photo.png" });
          const src = await t.storage.url(file._id, { width: 40, format: "webp" });
          const img = document.createElement("img");
          img.alt = "thumbnail";
          img.src = src;
          document.body.append(img);
          await img.decode();
          return { file, src, width: img.naturalWidth, height: img.naturalHeight };
        }""",
        base64.b64encode(picture.getvalue()).decode(),
    )
    assert (shown["file"]["contentType"], shown["file"]["isPublic"]) == ("image/png", False)
    assert shown["src"].startswith(f"{app_page.api}/storage/signed/"), shown["src"]
    assert (shown["width"], shown["height"]) == (40, 30)
    served = requests.get(shown["src"], timeout=30)
    assert served.status_code == 200 and served.headers["Content-Type"] == "image/webp"
    assert Image.open(io.BytesIO(served.content)).size == (40, 30)
