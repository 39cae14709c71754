"""Screenshots of the console's main pages, on a throwaway server with demo data.

    .venv/bin/python -m trellis_console.screenshots [OUTDIR]      (default: screenshots/)

Starts a real server (eventlet, as ``python wsgi.py``) on a temporary SQLite database, seeds demo data
through the REST API (as any client would), signs in to the console in headless Chromium and saves one
PNG per page. Needs the test extras (Playwright, requests) and Debian's chromium.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MASTER_KEY = "screenshot-master-key"
ADMIN = ("admin", "screenshot-admin-password")


class Client:
    """Just enough of an API client to seed data (admin = masterkey; users = their Bearer)."""

    def __init__(self, url: str, master_key: str = MASTER_KEY) -> None:
        import requests

        self.url = url
        self.master_key = master_key
        self.http = requests.Session()

    def call(self, method: str, path: str, token: str | None = None, **kwargs: Any) -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {"masterkey": self.master_key}
        response = self.http.request(method, self.url + path, headers=headers, timeout=30, **kwargs)
        if response.status_code >= 400:
            raise RuntimeError(f"{method} {path} → {response.status_code}: {response.text}")
        return response.json()

    def user(self, email: str, password: str = "demo-password-1") -> tuple[str, str]:
        created = self.call("POST", "/authentication/users", json={"email": email, "password": password})
        tokens = self.call("POST", "/authentication/local", json={"email": email, "password": password})
        return created["_id"], tokens["accessToken"]


def seed(client: Client) -> None:
    """Demo data in every loaded module, created through the REST API."""
    loaded = {m["name"] for m in client.call("GET", "/config")["modules"]}
    users: list[tuple[str, str]] = []
    if "authentication" in loaded:
        users = [client.user(email) for email in ("ada@example.com", "grace@example.com", "linus@example.com")]
        client.call("PUT", f"/authentication/users/{users[2][0]}/block")
    if "database" in loaded:
        client.call(
            "POST",
            "/admin/database/schemas",
            json={"name": "Author", "fields": {"name": {"type": "String", "required": True}, "born": "Date"}},
        )
        client.call(
            "POST",
            "/admin/database/schemas",
            json={
                "name": "Book",
                "fields": {
                    "title": {"type": "String", "required": True, "description": "as printed on the cover"},
                    "price": "Number",
                    "tags": ["String"],
                    "inStock": "Boolean",
                    "author": {"type": "Relation", "model": "Author"},
                },
            },
        )
        author = client.call(
            "POST", "/database/Author", json={"name": "Ursula K. Le Guin", "born": "1929-10-21T00:00:00Z"}
        )
        for title, price, tags in (
            ("The Dispossessed", 12.5, ["sf", "utopia"]),
            ("A Wizard of Earthsea", 9, ["fantasy"]),
            ("The Left Hand of Darkness", 11, ["sf"]),
        ):
            client.call(
                "POST",
                "/database/Book",
                json={"title": title, "price": price, "tags": tags, "inStock": price < 12, "author": author["_id"]},
            )
        client.call(
            "POST",
            "/admin/database/customEndpoints",
            json={
                "name": "cheapBooks",
                "operation": "GET",
                "selectedSchema": "Book",
                "inputs": [{"name": "max", "type": "Number", "location": "query"}],
                "query": {
                    "AND": [
                        {
                            "schemaField": "price",
                            "operation": "lte",
                            "comparisonField": {"type": "Input", "value": "max"},
                        }
                    ]
                },
            },
        )
    if "email" in loaded:
        client.call(
            "POST",
            "/admin/email/templates",
            json={"name": "welcome", "subject": "Welcome, {{name}}", "body": "<p>Hello {{name}}, welcome aboard.</p>"},
        )
        client.call(
            "POST",
            "/email/send",
            json={"to": "ada@example.com", "templateName": "welcome", "variables": {"name": "Ada"}},
        )
        client.call(
            "POST",
            "/email/send",
            json={
                "to": "grace@example.com",
                "subject": "Maintenance tonight",
                "body": "<p>We will be down from 22:00 to 23:00 UTC.</p>",
            },
        )
    if "forms" in loaded:
        form = client.call(
            "POST",
            "/admin/forms",
            json={
                "name": "Contact",
                "forwardTo": None,
                "fields": [
                    {"name": "email", "type": "email", "required": True},
                    {"name": "message", "type": "textarea"},
                ],
            },
        )
        for email, message in (("sam@example.org", "Do you ship to Norway?"), ("kim@example.org", "Love the app!")):
            client.http.post(
                f"{client.url}/forms/submit/{form['_id']}", json={"email": email, "message": message}, timeout=30
            ).raise_for_status()
    if "chat" in loaded and len(users) >= 2:
        room = client.call(
            "POST", "/chat/rooms", token=users[0][1], json={"roomName": "Book club", "users": [users[1][0]]}
        )
        client.call(
            "POST", f"/chat/rooms/{room['roomId']}/messages", token=users[0][1], json={"message": "Next up: Earthsea?"}
        )
        client.call(
            "POST", f"/chat/rooms/{room['roomId']}/messages", token=users[1][1], json={"message": "Yes, please!"}
        )
    if "storage" in loaded and users:
        folder = client.call("POST", "/storage/folder", token=users[0][1], json={"name": "Reports", "isPublic": False})
        client.call(
            "POST",
            "/storage/upload",
            token=users[0][1],
            data={"folder": folder["_id"]},
            files={"file": ("q3-summary.txt", b"Quarterly summary\n" * 40, "text/plain")},
        )
        client.call(
            "POST",
            "/storage/upload",
            token=users[1][1],
            data={"isPublic": "true"},
            files={"file": ("logo.png", _PNG, "image/png")},
        )
    if "sms" in loaded:
        client.call("POST", "/sms/send", json={"to": "+14155552671", "message": "Your code is 123456"})
    if "pushNotifications" in loaded and users:
        client.call(
            "POST",
            "/pushNotifications/token",
            token=users[0][1],
            json={"token": "device-token-1", "platform": "android"},
        )
        client.call(
            "POST", "/admin/pushNotifications/send", json={"userId": users[0][0], "title": "Hello", "body": "Welcome!"}
        )


# A 1×1 PNG, so the storage page shows an image type.
_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


@contextlib.contextmanager
def demo_server() -> Iterator[str]:
    """A migrated server on a temporary SQLite database; yields its URL."""
    from trellis.testing.plugin import free_port

    with tempfile.TemporaryDirectory(prefix="trellis-screenshots-") as folder:
        port = free_port()
        env = dict(os.environ)
        env.update(
            TRELLIS_DATABASE_URL=f"sqlite:///{folder}/demo.db",
            TRELLIS_MASTER_KEY=MASTER_KEY,
            TRELLIS_SECRET_KEY="screenshot-secret-key-long-enough-for-hs256",
            TRELLIS_ADMIN_USERNAME=ADMIN[0],
            TRELLIS_ADMIN_PASSWORD=ADMIN[1],
            TRELLIS_INSTANCE_PATH=folder,
            TRELLIS_STORAGE_PATH=f"{folder}/storage",
            TRELLIS_PASSWORD_PROFILE="test",
            HOST="127.0.0.1",
            PORT=str(port),
        )
        init = (
            "from trellis import create_app; from trellis.migrate import upgrade; "
            "from trellis.admins import ensure_first_admin; app = create_app(); upgrade(app); "
            "app.app_context().push(); ensure_first_admin()"
        )
        subprocess.run(
            [sys.executable, "-c", init],
            env={**env, "TRELLIS_ASYNC_MODE": "threading"},
            check=True,
            stdout=subprocess.DEVNULL,
        )
        with open(Path(folder) / "server.log", "wb") as log:
            server = subprocess.Popen(
                [sys.executable, "-m", "trellis.testing.server"], env=env, stdout=log, stderr=subprocess.STDOUT
            )
            try:
                _wait(f"http://127.0.0.1:{port}", server, Path(folder) / "server.log")
                yield f"http://127.0.0.1:{port}"
            finally:
                server.terminate()
                server.wait(10)


def _wait(url: str, server: subprocess.Popen, log: Path) -> None:
    import requests

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited:\n{log.read_text()}")
        try:
            if requests.get(url + "/health", timeout=1).ok:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the server did not start:\n{log.read_text()}")


def shoot(url: str, outdir: Path) -> list[Path]:
    from trellis.testing.browser import browser_page

    outdir.mkdir(parents=True, exist_ok=True)
    saved: list[Path] = []
    errors: list[str] = []
    with browser_page(viewport={"width": 1360, "height": 900}) as page:
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("dialog", lambda dialog: dialog.accept())

        def save(name: str) -> None:
            page.wait_for_load_state("networkidle")
            path = outdir / f"{name}.png"
            page.screenshot(path=str(path), full_page=True)
            saved.append(path)

        page.goto(url + "/console/login")
        save("01-login")
        page.fill("input[name=username]", ADMIN[0])
        page.fill("input[name=password]", ADMIN[1])
        page.fill("input[name=masterkey]", MASTER_KEY)
        page.click("button[type=submit]")
        page.wait_for_selector("#module-authentication form")
        card = page.locator("#module-authentication")
        card.locator("input[name=accessTokenMinutes]").fill("0")
        card.locator("button[type=submit]").click()
        card.locator(".field-error").wait_for()
        save("02-modules")
        # Every other page in the navigation (the loaded modules' pages); a row's first details button is
        # opened where there is one (a room's messages, a schema's documents …), so the shot shows both.
        links = page.locator("nav.sidebar a").evaluate_all("links => links.map((a) => a.getAttribute('href'))")
        for number, href in enumerate(links[1:], start=3):
            page.goto(url + href)
            page.wait_for_load_state("networkidle")
            details = page.locator("[data-list] tbody tr").first.locator("[data-do=select], [data-do=documents]")
            if details.count():
                details.first.click()
            save(f"{number:02d}-{href.rsplit('/', 1)[-1]}")
    if errors:
        raise RuntimeError(f"JavaScript errors in the console: {errors}")
    return saved


def main(argv: list[str]) -> int:
    outdir = Path(argv[0] if argv else "screenshots").resolve()
    with demo_server() as url:
        seed(Client(url))
        for path in shoot(url, outdir):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
