"""E-mail addresses: recipients are checked properly (email-validator), senders by shape only."""

from __future__ import annotations

from dataclasses import dataclass
from email.errors import HeaderParseError
from email.headerregistry import Address as HeaderAddress
from email.utils import getaddresses

from email_validator import EmailNotValidError, validate_email


@dataclass(frozen=True)
class Address:
    email: str
    name: str = ""

    def __str__(self) -> str:
        # Readable form ("Jürgen" <j@example.com>); the MIME layer encodes it when it writes headers.
        return str(HeaderAddress(display_name=self.name, addr_spec=self.email))


def _split(value: str) -> tuple[str, str]:
    if "\r" in value or "\n" in value:
        raise ValueError("Must not contain line breaks.")
    found = getaddresses([value.strip()])
    if len(found) != 1:
        raise ValueError("Give exactly one e-mail address.")
    name, email = found[0]
    if not email or "@" not in email:
        raise ValueError("Not a valid e-mail address.")
    return name, email


def parse_recipient(value: str) -> Address:
    """``a@b.example`` or ``Name <a@b.example>``; the address must be deliverable in form (no DNS lookup)."""
    name, email = _split(value)
    try:
        checked = validate_email(email, check_deliverability=False)
    except EmailNotValidError as exc:
        raise ValueError(str(exc)) from None
    return _checked(Address(checked.normalized, name))


def parse_sender(value: str) -> Address:
    """The sender is the operator's own address (may be e.g. ``no-reply@localhost``): shape only."""
    name, email = _split(value)
    return _checked(Address(email, name))


def _checked(address: Address) -> Address:
    """The address must also be writable as a mail header (the SMTP provider writes it)."""
    try:
        str(address)
    except (ValueError, HeaderParseError) as exc:  # header defects are ValueErrors
        raise ValueError(f"Not a valid e-mail address ({exc}).") from None
    return address
