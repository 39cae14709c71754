"""pytest plugin (entry point ``pytest11: trellis_email``): a real SMTP server for tests that send mail.

Fixtures:
    smtp_server          aiosmtpd on 127.0.0.1 (plain SMTP); ``.messages`` are the parsed deliveries
    smtp_server_factory  the same with aiosmtpd Controller options (``tls_context=…``, ``authenticator=…``),
                         ``refuse={addresses}``, ``delay=seconds`` (a slow server: it waits that long
                         before accepting each message) and ``port=`` (a server coming back where one was)

Each server has ``.email_config(**overrides)``: the Email module's ``smtp`` provider settings for
``PUT /admin/email/config``. Imports nothing from the module itself (see ``trellis_email/__init__``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from typing import Any

import pytest


@dataclass
class Delivery:
    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage
    tls: bool = False  # the message travelled over TLS (STARTTLS or implicit)
    authenticated: bool = False  # the client logged in with AUTH


@dataclass
class SMTPServer:
    host: str
    port: int
    controller: Any
    handler: _Recorder

    @property
    def messages(self) -> list[Delivery]:
        return self.handler.deliveries

    def email_config(self, **overrides: Any) -> dict[str, Any]:
        smtp = {"host": self.host, "port": self.port, "secure": "none", "timeout": 5, "username": "", "password": ""}
        smtp.update(overrides)
        return {"provider": "smtp", "smtp": smtp}

    def stop(self) -> None:
        if self.controller.server is not None:  # idempotent: tests stop a server to simulate an outage
            self.controller.stop()


@dataclass
class _Recorder:
    refuse: set[str] = field(default_factory=set)
    deliveries: list[Delivery] = field(default_factory=list)
    delay: float = 0.0  # seconds to wait before accepting a message (changeable while it runs)
    receiving: int = 0  # messages whose DATA has begun (the client is waiting for the answer)

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str, rcpt_options: list) -> str:
        if address in self.refuse:
            return "550 5.1.1 No such mailbox here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.receiving += 1
        if self.delay:
            await asyncio.sleep(self.delay)
            if server.transport is None or server.transport.is_closing():  # the client gave up or died
                return "421 Too late"
        parsed = BytesParser(policy=policy.default).parsebytes(envelope.original_content or envelope.content)
        tls = server.transport.get_extra_info("ssl_object") is not None
        self.deliveries.append(
            Delivery(envelope.mail_from, list(envelope.rcpt_tos), parsed, tls, bool(session.authenticated))
        )
        return "250 Message accepted for delivery"


@pytest.fixture()
def smtp_server_factory() -> Iterator[Callable[..., SMTPServer]]:
    from aiosmtpd.controller import Controller

    from trellis.testing.plugin import free_port

    servers: list[SMTPServer] = []

    def start(
        refuse: set[str] | None = None, delay: float = 0.0, port: int | None = None, **controller_options: Any
    ) -> SMTPServer:
        handler = _Recorder(refuse=set(refuse or ()), delay=delay)
        port = port or free_port()
        controller = Controller(handler, hostname="127.0.0.1", port=port, **controller_options)
        controller.start()
        server = SMTPServer("127.0.0.1", port, controller, handler)
        servers.append(server)
        return server

    try:
        yield start
    finally:
        for server in servers:
            server.stop()


@pytest.fixture()
def smtp_server(smtp_server_factory: Callable[..., SMTPServer]) -> SMTPServer:
    return smtp_server_factory()
