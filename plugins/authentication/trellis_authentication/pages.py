"""Pages for the links in mail and for a user's own account, served by the server itself so that they work
in a browser before an app of one's own exists (README, "Pages: mailed links and the account, in a browser").

- ``GET /authentication/reset?reset_token=`` (the default link of ForgotPassword): a form that sets the new
  password through ``POST /authentication/reset-password``.
- The verification, change-email and magic-link hooks answer a page when the client prefers
  ``text/html`` (a browser opening the mailed link), JSON otherwise; a configured redirect URI still wins.
- ``GET /authentication/account``: sign in, see and end one's sessions, sign out, delete the account.
- ``GET /authentication/teams/invite/accept?invitationToken=`` opened in a browser without credentials (the
  TeamInvite link): a page that signs in (or signs up) and accepts through the same JSON route.

Server-rendered, no external assets: one style sheet and small scripts from this package, under the strict
page CSP of every module page (``trellis.http.PAGE_SECURITY_HEADERS``), so a token in a page's address
reaches no third party and no referrer. The scripts call the same JSON routes as any client; the pages
implement no rule of their own. They are browser pages, not API operations: nothing in ``/openapi.json``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from flask import make_response, redirect, render_template, request
from werkzeug.wrappers import Response

from trellis.errors import APIError
from trellis.http import PageBlueprint, secure_page

from . import account, tokens

pages = PageBlueprint(
    "authentication_pages",
    __name__,
    url_prefix="/authentication",
    template_folder="templates",
    static_folder="static",
    static_url_path="/pages",
    description="The pages of mailed links and of a user's own account",
)

ACCOUNT = "/authentication/account"


def wants_html() -> bool:
    """Whether the client prefers a page: a browser sends ``text/html`` first; ``*/*`` (curl, fetch, most
    HTTP libraries) and ``application/json`` keep the JSON answer."""
    return request.accept_mimetypes.best_match(["application/json", "text/html"]) == "text/html"


def outcome(status: int, title: str, message: str, next_href: str | None = None, next_text: str = "") -> Response:
    """A page that says what happened and what to do next. A response object, with the page headers: the
    hooks that answer it are API routes, whose own answers are JSON."""
    html = render_template(
        "authentication/outcome.html", title=title, message=message, next_href=next_href, next_text=next_text
    )
    return secure_page(make_response(html, status, {"Content-Type": "text/html; charset=utf-8"}))


def _failed(exc: APIError, what_next: str) -> Any:
    return outcome(exc.status, "This link does not work", f"{exc.message}. {what_next}", ACCOUNT, "Go to your account")


def link_page(action: Callable[[str], str | None], title: str, message: str, what_next: str) -> Callable[[str], Any]:
    """The page of a hook that confirms something (an address, a change): the configured redirect, the
    outcome, or what went wrong and what to do instead."""

    def page(token: str) -> Any:
        try:
            redirect_uri = action(token)
        except APIError as exc:
            return _failed(exc, what_next)
        if redirect_uri:
            return redirect(redirect_uri, 302)
        return outcome(200, title, message, ACCOUNT, "Sign in to your account")

    return page


verify_email_page = link_page(
    account.verify_email,
    "Email address verified",
    "Your email address is confirmed. You can sign in now.",
    "Sign in and ask for a new verification link if you still need one.",
)
verify_change_email_page = link_page(
    account.verify_change_email,
    "Email address changed",
    "Your new email address is confirmed and is now the one you sign in with.",
    "Sign in with your current address and change it again to get a new link.",
)


def magic_link_page(token: str) -> Any:
    """A signed-in session handed to the account page in the URL fragment (never sent to a server), as
    ``magicLink.redirectUri`` would receive it."""
    try:
        result, redirect_uri = account.sign_in_with_magic_link(token)
    except APIError as exc:
        return _failed(exc, "Ask for a new sign-in link.")
    return redirect(f"{redirect_uri or ACCOUNT}#{urlencode(result)}", 302)


def invite_page(func: Callable[..., Any]) -> Callable[..., Any]:
    """Serves the TeamInvite link's page to a browser that sends no credentials (the mailed link opened in
    a browser); every other client gets the JSON route it decorates."""

    @functools.wraps(func)
    def route(*args: Any, **kwargs: Any) -> Any:
        if wants_html() and "Authorization" not in request.headers:
            token = request.args.get("invitationToken", "")
            html = render_template("authentication/invite.html", title="Join a team", token=token)
            return secure_page(make_response(html, 200, {"Content-Type": "text/html; charset=utf-8"}))
        return func(*args, **kwargs)

    return route


@pages.get("/reset")
def reset() -> Any:
    """The page of the ForgotPassword link: a new-password form, or why the link no longer works."""
    token = request.args.get("reset_token", "")
    if tokens.find(tokens.RESET_PASSWORD, token) is None:
        return outcome(
            400,
            "This link does not work",
            "This password reset link is unknown, used or expired (links work once, for one hour). "
            "Ask for a new one from your account page or your app.",
            ACCOUNT,
            "Go to your account",
        )
    return render_template("authentication/reset.html", title="Choose a new password", token=token)


@pages.get("/account")
def account_page() -> Response | str:
    """Sign in and manage one's own account (sessions, sign out, delete)."""
    return render_template("authentication/account.html", title="Your account")
