"""The console's server side: the navigation, the pages the loaded modules contribute, assets, headers.

The console knows no module. Each module declares its pages (``Module.console_pages``: a template and an
optional script in its own package); the console offers the pages of the modules that are loaded, and
nothing else. Pages carry no data: they are static shells that the JavaScript fills from the REST API
with the administrator's Bearer token (kept in ``sessionStorage``, see README.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path

from flask import Flask, Response, current_app, redirect, render_template, request, send_file, url_for
from jinja2 import BaseLoader, ChoiceLoader, Environment, FileSystemLoader, TemplateNotFound
from werkzeug.wrappers import Response as WerkzeugResponse

from trellis import ConsolePage, Module
from trellis.errors import not_found
from trellis.http import PageBlueprint, secure_page
from trellis.modules import ModuleError

MODULE = "console"
HERE = Path(__file__).parent

# The console's own pages: the first leads the navigation, the rest close it (the audit log last); other
# modules' pages go between, by title.
OWN_PAGES = (
    ConsolePage(
        "modules", "Modules", str(HERE / "templates" / "console" / "modules.html"), str(HERE / "static" / "modules.js")
    ),
    ConsolePage(
        "project", "Project", str(HERE / "templates" / "console" / "project.html"), str(HERE / "static" / "project.js")
    ),
    ConsolePage("audit", "Audit log", str(HERE / "templates" / "console" / "audit.html")),
)
# Paths under /console that are not pages.
RESERVED_SLUGS = frozenset({"login", "static", "scripts"})
PAGE_TEMPLATE_PREFIX = "console/page/"


def navigation(modules: Sequence[Module]) -> list[ConsolePage]:
    """Every page of the loaded modules, in navigation order; fails fast on a clash or a missing file."""
    own = next(m.console_pages for m in modules if m.name == MODULE)
    others = sorted(
        (page for module in modules if module.name != MODULE for page in module.console_pages),
        key=lambda page: page.title.casefold(),
    )
    pages = [*own[:1], *others, *own[1:]]
    seen: set[str] = set()
    for page in pages:
        if page.slug in seen:
            raise ModuleError(f"two loaded modules declare the console page {page.slug!r}")
        if page.slug in RESERVED_SLUGS:
            raise ModuleError(f"console page {page.slug!r}: the name is reserved ({', '.join(sorted(RESERVED_SLUGS))})")
        seen.add(page.slug)
        for path in (page.template, page.script):
            if path is not None and not os.path.isfile(path):
                raise ModuleError(f"console page {page.slug!r} names a file that does not exist: {path}")
    return pages


def pages() -> list[ConsolePage]:
    return current_app.extensions["trellis_console"]


def _page(slug: str) -> ConsolePage:
    found = next((page for page in pages() if page.slug == slug), None)
    if found is None:
        raise not_found(f"No console page named {slug!r}")
    return found


class _PageTemplates(BaseLoader):
    """``console/page/<slug>``: the template file that page's module names (reloaded when it changes)."""

    def get_source(self, environment: Environment, template: str) -> tuple[str, str, Callable[[], bool]]:
        if not template.startswith(PAGE_TEMPLATE_PREFIX):
            raise TemplateNotFound(template)
        page = next((p for p in pages() if p.slug == template[len(PAGE_TEMPLATE_PREFIX) :]), None)
        if page is None:
            raise TemplateNotFound(template)
        path = Path(page.template)
        mtime = path.stat().st_mtime

        def uptodate() -> bool:
            try:
                return path.stat().st_mtime == mtime
            except OSError:
                return False

        return path.read_text("utf-8"), str(path), uptodate


class ConsoleBlueprint(PageBlueprint):
    @cached_property
    def jinja_loader(self) -> BaseLoader:
        return ChoiceLoader([FileSystemLoader(str(HERE / "templates")), _PageTemplates()])


bp = ConsoleBlueprint("console", __name__, url_prefix="/console", static_folder="static")


@bp.before_request
def _only_when_active() -> None:
    if not current_app.extensions["trellis"].configs.is_active(MODULE):
        raise not_found("The console module is not active")


@bp.get("/")
def index() -> WerkzeugResponse:
    return redirect(url_for("console.page", name=pages()[0].slug))


@bp.get("/login")
def login() -> str:
    return render_template("console/login.html", page="login", title="Sign in")


@bp.get("/<string:name>")
def page(name: str) -> str:
    current = _page(name)
    trellis = current_app.extensions["trellis"]
    return render_template(
        PAGE_TEMPLATE_PREFIX + current.slug,
        page=current.slug,
        title=current.title,
        script=current.script is not None,
        pages=pages(),
        page_size=trellis.configs.get(MODULE)["pageSize"],
        loaded=[m.name for m in trellis.modules],
    )


@bp.get("/scripts/<string:slug>.js")
def script(slug: str) -> Response:
    """A page's script, from its module's package."""
    path = _page(slug).script
    if path is None:
        raise not_found(f"The console page {slug!r} has no script")
    return send_file(path, mimetype="text/javascript", conditional=True)


def _security_headers(response: Response) -> Response:
    # On every /console response, including 404s for paths no console route matched (the blueprint's
    # own hook covers only the routes it has).
    if request.path == "/console" or request.path.startswith("/console/"):
        secure_page(response)
    return response


def init_app(app: Flask) -> None:
    app.extensions["trellis_console"] = navigation(app.extensions["trellis"].modules)
    app.after_request(_security_headers)
