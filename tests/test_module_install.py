"""`pip install` of a module adds its routes and migrations without touching the core.

The tiny module in tests/tiny_module is installed with pip into a private folder (never into the
project's virtualenv) and a separate process sees it through the normal entry-point discovery.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CHECK = """
from trellis import create_app
app = create_app()
client = app.test_client()
key = {"masterkey": "k"}
created = client.post("/tiny/notes", json={"text": "installed"})
listed = client.get("/tiny/notes")
doc = client.get("/openapi.json").get_json()
import json
print(json.dumps({"modules": [m.name for m in app.extensions["trellis"].modules],
                  "created": created.status_code, "listed": listed.get_json(),
                  "documented": "/tiny/notes" in doc["paths"]}))
"""


@pytest.mark.long
def test_pip_installed_module_brings_routes_and_migrations(module_cli_env):
    env = module_cli_env(ROOT / "tests" / "tiny_module")
    flask = [sys.executable, "-m", "flask", "--app", str(ROOT / "wsgi.py"), "trellis"]
    upgraded = subprocess.run([*flask, "db", "upgrade"], env=env, capture_output=True, text=True)
    assert upgraded.returncode == 0, upgraded.stderr
    listed = subprocess.run([*flask, "modules"], env=env, capture_output=True, text=True)
    assert listed.stdout.split() == ["tiny"]
    result = subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen == {"modules": ["tiny"], "created": 201, "listed": [{"text": "installed"}], "documented": True}


def test_without_the_package_the_module_is_absent(module_cli_env):
    env = module_cli_env()
    result = subprocess.run(
        [sys.executable, "-m", "flask", "--app", str(ROOT / "wsgi.py"), "trellis", "modules"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "not installed: tiny" in result.stderr
