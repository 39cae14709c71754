"""SMS routes: send (one or many, administrative), the outbox, the configuration."""

from __future__ import annotations

from typing import Any

from trellis.credentials import admin_required
from trellis.errors import ErrorSchema, provider_error
from trellis.http import Blueprint
from trellis.module_config import admin_config_routes

from . import service
from .config import SmsConfig
from .models import SENT
from .schemas import (
    SmsOutboxArgs,
    SmsOutboxSchema,
    SmsSendManyResultSchema,
    SmsSendManySchema,
    SmsSendSchema,
    SmsSentSchema,
)

blp = Blueprint("sms", __name__, description="Text messages to one or many phone numbers (outbox or Twilio)")

_PROVIDER_FAILED = "The provider did not take the message; the reason is in `message` (and in the outbox)"


@blp.route("/sms/send", methods=["POST"])
@admin_required
@blp.arguments(SmsSendSchema)
@blp.response(200, SmsSentSchema)
@blp.alt_response(400, schema=ErrorSchema, description="Invalid phone number format (or missing fields)")
@blp.alt_response(500, schema=ErrorSchema, description=_PROVIDER_FAILED)
def send(body: dict[str, Any]):
    """Send one text message."""
    (record,) = service.send([body["to"]], body["message"])
    if record.status != SENT:
        raise provider_error(f"SMS not sent: {record.error}")
    return {"message": "SMS sent", "messageId": record.id}


@blp.route("/sms/sendMany", methods=["POST"])
@admin_required
@blp.arguments(SmsSendManySchema)
@blp.response(200, SmsSendManyResultSchema)
@blp.alt_response(400, schema=ErrorSchema, description="A phone number is invalid: nothing was sent")
@blp.alt_response(500, schema=ErrorSchema, description="The provider took none of the messages")
def send_many(body: dict[str, Any]):
    """Send the same text to several numbers (each number once); per-recipient results.

    Every number is checked before anything is sent. When the provider refuses some recipients the
    answer is still 200 with their `status: failed`; when it refuses all of them it is a 500.
    """
    recipients = list(dict.fromkeys(body["to"]))  # the same number twice gets one message
    records = service.send(recipients, body["message"])
    if all(r.status != SENT for r in records):
        raise provider_error(f"SMS not sent: {records[0].error}")
    results = []
    for record in records:
        result = {"to": record.to, "messageId": record.id, "status": record.status}
        if record.error:
            result["error"] = record.error
        results.append(result)
    return {"results": results}


@blp.route("/admin/sms/outbox", methods=["GET"])
@admin_required
@blp.arguments(SmsOutboxArgs, location="query")
@blp.response(200, SmsOutboxSchema)
def outbox(args: dict[str, Any]):
    """Every message the module sent or tried to send, newest first (`to`, `status`, `provider` filter)."""
    skip, limit = args.pop("skip"), args.pop("limit")
    records, total = service.list_messages(skip, limit, args)
    return {"messages": [service.record_dict(r) for r in records], "count": total}


admin_config_routes(
    blp, service.MODULE, SmsConfig, '`{"provider": "twilio", "twilio": {accountSid, authToken, phoneNumber}}`'
)
