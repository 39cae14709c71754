"""Headless Chromium (Debian's package) driven by Playwright, for page tests and screenshots."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import ViewportSize

CHROMIUM = os.environ.get("TRELLIS_CHROMIUM", "/usr/bin/chromium")
# Without these, Chromium keeps dialling Google services that this closed network refuses.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def chromium_path() -> str | None:
    return CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")


@contextlib.contextmanager
def browser_page(viewport: ViewportSize | None = None) -> Iterator[Any]:
    """A fresh Playwright page in headless Chromium with an empty profile."""
    from playwright.sync_api import sync_playwright

    path = chromium_path()
    if path is None:
        raise RuntimeError("Chromium is not installed (make test installs Debian's chromium package)")
    with tempfile.TemporaryDirectory(prefix="trellis-chromium-") as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=path,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport=viewport or {"width": 1280, "height": 900},
        )
        try:
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()


@contextlib.contextmanager
def watch_problems(page: Any) -> Iterator[list[str]]:
    """The problems a page shows while the block runs: uncaught script errors, and Content-Security-Policy
    violations reported in its console. The list is live (a test may drop one it expects); the browser
    tests assert it empty at the end, so a page that breaks or needs what its CSP forbids fails them."""
    problems: list[str] = []

    def on_error(error: Any) -> None:
        problems.append(f"uncaught: {error}")

    def on_console(message: Any) -> None:
        if message.type == "error" and "Content Security Policy" in message.text:
            problems.append(f"CSP: {message.text}")

    page.on("pageerror", on_error)
    page.on("console", on_console)
    try:
        yield problems
    finally:
        page.remove_listener("pageerror", on_error)
        page.remove_listener("console", on_console)
