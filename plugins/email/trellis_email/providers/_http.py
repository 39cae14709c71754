"""What Mailgun and SendGrid share: one HTTP call with a timeout, failures turned into ProviderFailure."""

from __future__ import annotations

from typing import Any

import requests

from .base import ProviderFailure

USER_AGENT = "trellis-email/0.1"


def call(label: str, method: str, url: str, timeout: float, **kwargs: Any) -> requests.Response:
    """Send one request; any transport error or 4xx/5xx answer becomes a ProviderFailure naming the reason.

    The message names the provider's own explanation but never the request (which carries the API key).
    """
    headers = {"User-Agent": USER_AGENT, **kwargs.pop("headers", {})}
    try:
        response = requests.request(method, url, timeout=timeout, headers=headers, allow_redirects=False, **kwargs)
    except requests.Timeout:
        raise ProviderFailure(f"{label} did not answer within {timeout:g} s") from None
    except requests.RequestException as exc:
        raise ProviderFailure(f"Cannot reach {label}: {exc.__class__.__name__}") from None
    if response.status_code >= 300:
        raise ProviderFailure(f"{label} answered {response.status_code}: {_reason(response)}", response.status_code)
    return response


def json_of(label: str, response: requests.Response) -> dict[str, Any]:
    """The JSON object of an answer; anything else is the provider misbehaving, reported as its failure."""
    try:
        data = response.json()
    except ValueError:
        raise ProviderFailure(f"{label} answered with something that is not JSON") from None
    if not isinstance(data, dict):
        raise ProviderFailure(f"{label} answered with JSON that is not an object")
    return data


def text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _reason(response: requests.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return (response.text or response.reason or "").strip()[:300] or "no details"
    if isinstance(data, dict):
        if isinstance(data.get("message"), str):
            return data["message"][:300]
        errors = data.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            return "; ".join(str(e.get("message", e)) for e in errors[:3])[:300]
    return str(data)[:300]


def same_origin(base_url: str, url: str) -> bool:
    """Paging links are followed only under the configured base URL (the API key goes with them)."""
    return url.startswith(base_url.rstrip("/") + "/")
