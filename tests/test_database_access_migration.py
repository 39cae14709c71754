"""database_0004 on schemas stored before opting in closed anonymous creates: a schema under access control
whose create switch was off takes creates from signed-in users only; every other schema is left as it was."""

import json

from sqlalchemy import text

from trellis import create_app
from trellis.migrate import upgrade


def _options(authorization: bool, create_authenticated: bool) -> str:
    operations = {op: {"enabled": True, "authenticated": False} for op in ("create", "read", "update", "delete")}
    operations["create"]["authenticated"] = create_authenticated
    conduit = {"cms": {"enabled": True, "crudOperations": operations}, "authorization": {"enabled": authorization}}
    return json.dumps({"timestamps": True, "conduit": conduit})


def test_opted_in_schemas_stop_taking_anonymous_creates(app_config, empty_database_url):
    app = create_app({**app_config, "DATABASE_URL": empty_database_url})
    engine = app.extensions["trellis"].engine
    cases = {"s1": (True, False), "s2": (True, True), "s3": (False, False)}
    try:
        upgrade(app, "database_0003")
        with engine.begin() as conn:
            for schema_id, (authorization, authenticated) in cases.items():
                conn.execute(
                    text(
                        "INSERT INTO database_schemas (id, name, owner_module, fields, model_options, extensions,"
                        " storage, version, created_at, updated_at) VALUES (:id, :name, 'database', '{}', :options,"
                        " '[]', '{}', 0, '2026-01-01 00:00:00', '2026-01-01 00:00:00')"
                    ),
                    {"id": schema_id, "name": f"N{schema_id}", "options": _options(authorization, authenticated)},
                )
        upgrade(app)
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT id, model_options FROM database_schemas ORDER BY id")).all()
        switches = {}
        for schema_id, stored in rows:
            options = json.loads(stored) if isinstance(stored, str) else stored
            switches[schema_id] = options["conduit"]["cms"]["crudOperations"]["create"]["authenticated"]
            assert options["conduit"]["cms"]["crudOperations"]["read"]["authenticated"] is False
        assert switches == {"s1": True, "s2": True, "s3": False}
    finally:
        engine.dispose()
