"""SMTP delivery with smtplib: plain, STARTTLS or implicit TLS, certificate checked, every step timed out."""

from __future__ import annotations

import smtplib
import ssl
from collections.abc import Iterator
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import Any

from .base import Outgoing, ProviderFailure, RemoteTemplate, TemplatesUnsupported


class Smtp:
    name = "smtp"

    def __init__(self, config: dict[str, Any]) -> None:
        self.host: str = config["host"]
        self.port: int = config["port"]
        self.username: str = config["username"]
        self.password: str = config["password"]
        self.secure: str = config["secure"]
        self.timeout: float = config["timeout"]

    def build(self, message: Outgoing) -> EmailMessage:
        mime = EmailMessage()
        mime["From"] = str(message.sender)
        mime["To"] = str(message.to)
        mime["Subject"] = message.subject
        mime["Date"] = formatdate(localtime=False)
        domain = message.sender.email.rpartition("@")[2] or None
        mime["Message-ID"] = make_msgid(domain=domain)
        mime.set_content(message.text or " ")
        mime.add_alternative(message.html, subtype="html")
        return mime

    def send(self, message: Outgoing) -> str | None:
        mime = self.build(message)
        try:
            with self._connect() as client:
                if self.username:
                    client.login(self.username, self.password)
                refused = client.send_message(mime)
        except smtplib.SMTPAuthenticationError as exc:
            raise ProviderFailure(f"SMTP authentication failed ({exc.smtp_code})") from None
        except smtplib.SMTPRecipientsRefused as exc:
            reasons = "; ".join(f"{rcpt}: {code} {_text(msg)}" for rcpt, (code, msg) in exc.recipients.items())
            raise ProviderFailure(f"SMTP server refused the recipient: {reasons}") from None
        except smtplib.SMTPResponseException as exc:
            raise ProviderFailure(f"SMTP server answered {exc.smtp_code} {_text(exc.smtp_error)}") from None
        except smtplib.SMTPServerDisconnected as exc:
            # smtplib turns a read timeout into "disconnected"; the timeout is the useful part.
            if isinstance(exc.__context__, TimeoutError):
                raise ProviderFailure(
                    f"SMTP server {self.host}:{self.port} did not answer within {self.timeout:g} s"
                ) from None
            raise ProviderFailure(f"SMTP server {self.host}:{self.port} closed the connection: {exc}") from None
        except smtplib.SMTPException as exc:
            raise ProviderFailure(f"SMTP error: {exc}") from None
        except ssl.SSLError as exc:
            detail = getattr(exc, "verify_message", None)
            reason = f"certificate verify failed: {detail}" if detail else (exc.reason or str(exc))
            raise ProviderFailure(f"TLS with the SMTP server failed: {reason}") from None
        except TimeoutError:
            raise ProviderFailure(
                f"SMTP server {self.host}:{self.port} did not answer within {self.timeout:g} s"
            ) from None
        except OSError as exc:  # refused, unreachable, DNS failure
            reason = exc.strerror or exc.__class__.__name__
            raise ProviderFailure(f"Cannot reach SMTP server {self.host}:{self.port}: {reason}") from None
        if refused:
            raise ProviderFailure(f"SMTP server refused recipients: {', '.join(refused)}")
        return mime["Message-ID"]

    def _connect(self) -> smtplib.SMTP:
        context = ssl.create_default_context()
        if self.secure == "ssl":
            return smtplib.SMTP_SSL(self.host, self.port, timeout=self.timeout, context=context)
        client = smtplib.SMTP(self.host, self.port, timeout=self.timeout)
        try:
            client.ehlo()
            if self.secure == "starttls":
                # Never fall back to plain text: a server without STARTTLS is an error here.
                client.starttls(context=context)
                client.ehlo()
        except BaseException:
            client.close()
            raise
        return client

    def upload_template(self, name: str, subject: str, body: str, external_id: str | None) -> str:
        raise TemplatesUnsupported(self.name)

    def list_templates(self) -> Iterator[RemoteTemplate]:
        raise TemplatesUnsupported(self.name)


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
