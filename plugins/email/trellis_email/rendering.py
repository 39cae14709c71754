"""Template placeholders: ``{{name}}`` rendered by Jinja2's sandbox; the body is HTML-escaped, the subject not.

Templates are written by administrators but variables come from API callers, so every value is
escaped in the HTML body and a variable cannot reach Python internals (sandbox). A placeholder
without a value is an error, never an empty string (StrictUndefined).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, Template, TemplateError, meta
from jinja2.sandbox import SandboxedEnvironment

from trellis.errors import bad_request

_BODY = SandboxedEnvironment(autoescape=True, undefined=StrictUndefined)
_SUBJECT = SandboxedEnvironment(autoescape=False, undefined=StrictUndefined)


@lru_cache(maxsize=128)
def _compile(part: str, source: str) -> tuple[Template, frozenset[str]]:
    """Compiled template and its variables; cached by text, since sends reuse a few templates."""
    env = _SUBJECT if part == "subject" else _BODY
    # from_string also catches unknown filters and tests, which parse() accepts.
    return env.from_string(source), frozenset(meta.find_undeclared_variables(env.parse(source)))


def placeholders(subject: str, body: str) -> list[str]:
    """The variable names used by a template, sorted; 400 naming the part that does not parse."""
    names: set[str] = set()
    errors: dict[str, list[str]] = {}
    for part, source in (("subject", subject), ("body", body)):
        try:
            names |= _compile(part, source)[1]
        except TemplateError as exc:
            errors[part] = [f"Template syntax error: {exc.message or exc.__class__.__name__}"]
    if errors:
        raise bad_request("The template does not parse", errors)
    return sorted(names)


def render(subject: str, body: str, variables: dict[str, Any]) -> tuple[str, str]:
    """Rendered (subject, body); 400 when a placeholder has no value or the template fails on these values."""
    missing = [name for name in placeholders(subject, body) if name not in variables]
    if missing:
        raise bad_request(
            "Missing template variables: " + ", ".join(missing),
            {"variables": {name: ["Missing value for this placeholder."] for name in missing}},
        )
    try:
        rendered_subject = _compile("subject", subject)[0].render(variables)
        rendered_body = _compile("body", body)[0].render(variables)
    except TemplateError as exc:  # includes the sandbox's SecurityError and undefined attributes
        raise bad_request(f"The template cannot be rendered with these variables: {exc.message}") from None
    except (TypeError, ValueError, ArithmeticError) as exc:  # e.g. {{ a + b }} with a string and a number
        raise bad_request(f"The template cannot be rendered with these variables: {exc}") from None
    if "\r" in rendered_subject or "\n" in rendered_subject:
        raise bad_request(
            "The rendered subject contains a line break", {"variables": ["Line breaks are not allowed in the subject."]}
        )
    return rendered_subject, rendered_body
