"""Writes ``schema.sql``: the schema-only dump of a fresh Trellis database holding the peer benchmark's Item
(its table renamed ``dbdoc_item``), indexed as Parse's (price only). ``run.sh`` builds its databases from it.

    .venv/bin/python -m bench.event_log_layout.schema
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import requests

from bench.common import bench_server
from bench.peer_cases import LIKE_PARSE, NEW_ITEM

HERE = Path(__file__).parent


def main() -> None:
    with bench_server("postgresql", modules="authentication,database,email,sms") as trellis:
        schema = {"name": "Item", "fields": LIKE_PARSE}
        requests.post(f"{trellis.url}/admin/database/schemas", json=schema, headers=trellis.admin_headers, timeout=60)
        requests.post(f"{trellis.url}/database/Item", json=NEW_ITEM, headers=trellis.admin_headers, timeout=60)
        database = trellis.database_url.rsplit("/", 1)[1]
        dump = subprocess.run(
            ["pg_dump", "-h", "127.0.0.1", "-U", "postgres", "--schema-only", database],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    (HERE / "schema.sql").write_text(re.sub(r"dbdoc_[0-9a-f]{32}", "dbdoc_item", dump))


if __name__ == "__main__":
    main()
