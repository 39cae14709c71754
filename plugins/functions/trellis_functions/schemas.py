"""The Functions module's request and response bodies."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from trellis.http import ListArgs


class FunctionCallResultSchema(Schema):
    result = fields.Raw(allow_none=True, metadata={"description": "what the function returned"})


class FunctionFileSchema(Schema):
    name = fields.String(required=True)
    loaded = fields.Boolean(required=True)
    error = fields.String()
    line = fields.Integer()
    loadedAt = fields.String(required=True)


class FunctionTriggerSchema(Schema):
    schema = fields.String(required=True)
    event = fields.String(required=True)
    function = fields.String(required=True)
    file = fields.String(required=True)


class CallableFunctionSchema(Schema):
    name = fields.String(required=True)
    auth = fields.String(required=True)
    file = fields.String(required=True)


class FunctionScheduleSchema(Schema):
    name = fields.String(required=True)
    cron = fields.String(required=True)
    file = fields.String(required=True)
    lastRunAt = fields.String()
    nextRunAt = fields.String(required=True)


class FunctionsOverviewSchema(Schema):
    folder = fields.String(required=True)
    reload = fields.Boolean(required=True)
    files = fields.List(fields.Nested(FunctionFileSchema), required=True)
    triggers = fields.List(fields.Nested(FunctionTriggerSchema), required=True)
    functions = fields.List(fields.Nested(CallableFunctionSchema), required=True)
    schedules = fields.List(fields.Nested(FunctionScheduleSchema), required=True)


class FunctionLogArgs(ListArgs):
    function = fields.String(validate=validate.Length(max=200))
    status = fields.String(validate=validate.OneOf(["ok", "error", "rejected"]))


class FunctionLogEntrySchema(Schema):
    _id = fields.String(required=True)
    function = fields.String(required=True)
    kind = fields.String(required=True)
    status = fields.String(required=True)
    durationMs = fields.Integer(required=True)
    message = fields.String()
    attempt = fields.Integer()
    requestId = fields.String()
    createdAt = fields.String(required=True)


class FunctionLogSchema(Schema):
    entries = fields.List(fields.Nested(FunctionLogEntrySchema), required=True)
    count = fields.Integer(required=True)


class FunctionScheduleRunSchema(Schema):
    name = fields.String(required=True)
    started = fields.Boolean(required=True)
