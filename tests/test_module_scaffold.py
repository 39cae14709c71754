"""The path docs/modules.md describes, end to end: ``flask trellis module new``, ``pip install`` into a
throwaway environment, migrate, ``flask trellis db revision --module``, serve, OpenAPI, and the
skeleton's own tests, on the database under test.
"""

import os
import site
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from sqlalchemy import create_engine, inspect, text

from trellis.testing.plugin import TEST_MASTER_KEY, TEST_SECRET_KEY, LiveServer, free_port
from trellis_authentication.testing import create_user_over_http

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[1]
NAME = "bird_watch"  # an underscore: the file, class, table and URL substitutions all show
PACKAGE = f"trellis_{NAME}"
# The skeleton requires authentication, which requires email and sms.
ENABLED = f"{NAME},authentication,email,sms"


def throwaway_environment(folder: Path) -> Path:
    """A venv that installs into its own site-packages and sees this environment's packages (read-only).

    A ``.pth`` line adds this environment's site directories (their own ``.pth`` files, editable installs
    included, are processed). pip comes from there too: nothing is downloaded. Not the base interpreter's
    packages (``--system-site-packages``): a distribution's Python brings its own, ahead of ours on the path
    (Debian's pyOpenSSL 23, which eventlet imports, failed against this environment's newer cryptography).
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    lines = "".join(f"import site; site.addsitedir({directory!r})\n" for directory in site.getsitepackages())
    Path(purelib, "_parent_environment.pth").write_text(lines)
    return python


def run(command: list, env: dict[str, str], cwd: Path | None = None, timeout: float = 600) -> str:
    result = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{command[2:]} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def columns(url: str, table: str) -> set[str]:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return {column["name"] for column in inspect(connection).get_columns(table)}
    finally:
        engine.dispose()


@pytest.mark.long
def test_a_new_module_installs_migrates_serves_and_passes_its_tests(tmp_path, empty_database_url):
    python = throwaway_environment(tmp_path / "venv")
    env = {
        **os.environ,
        "TRELLIS_DATABASE_URL": empty_database_url,
        "TRELLIS_MODULES": ENABLED,
        "TRELLIS_MASTER_KEY": TEST_MASTER_KEY,
        "TRELLIS_SECRET_KEY": TEST_SECRET_KEY,
        "TRELLIS_INSTANCE_PATH": str(tmp_path / "instance"),
        "TRELLIS_ASYNC_MODE": "threading",
    }
    flask = [str(python), "-m", "flask", "--app", str(ROOT / "wsgi.py"), "trellis"]

    # Before the package exists TRELLIS_MODULES cannot name it: the author's usual environment then.
    run(
        [*flask, "module", "new", NAME, "--path", str(tmp_path)],
        {k: v for k, v in env.items() if k != "TRELLIS_MODULES"},
    )
    skeleton = tmp_path / f"trellis-{NAME}"
    run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", str(skeleton)], env)
    installed = run([str(python), "-c", f"import {PACKAGE}; print({PACKAGE}.__file__)"], env)
    assert installed.strip() == str(skeleton / PACKAGE / "__init__.py")
    assert f"{NAME} (requires authentication)" in run([*flask, "modules"], env).splitlines()

    run([*flask, "db", "upgrade"], env)
    assert columns(empty_database_url, f"{NAME}_items") == {"id", "user_id", "title", "url", "created_at"}

    # The author adds a column; a table of nobody's (here: made by hand) must not leak into the revision.
    models = skeleton / PACKAGE / "models.py"
    source = models.read_text()
    assert "    url: Mapped[str] = mapped_column(Text)\n" in source
    models.write_text(
        source.replace(
            "    url: Mapped[str] = mapped_column(Text)\n",
            "    url: Mapped[str] = mapped_column(Text)\n    note: Mapped[str | None] = mapped_column(String(20))\n",
        )
    )
    engine = create_engine(empty_database_url)
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE stray_notes (id INTEGER PRIMARY KEY)"))
    engine.dispose()
    wrote = run([*flask, "db", "revision", "--module", NAME, "-m", "add note"], env)
    revision = skeleton / PACKAGE / "migrations" / "versions" / "0002_add_note.py"
    assert str(revision) in wrote
    script = revision.read_text()
    assert f'revision = "{NAME}_0002"' in script
    assert f'down_revision = "{NAME}_0001"' in script
    assert "branch_labels = None" in script
    assert 'sa.Column("note"' in script and "add_column" in script
    assert "stray_notes" not in script and "auth_users" not in script

    run([*flask, "db", "upgrade"], env)
    assert "note" in columns(empty_database_url, f"{NAME}_items")

    # Served by the real entry point (python wsgi.py, eventlet) from the throwaway environment.
    port = free_port()
    serve_env = {**env, "TRELLIS_ASYNC_MODE": "eventlet", "HOST": "127.0.0.1", "PORT": str(port)}
    server = LiveServer(serve_env, port, tmp_path / "server.log", [str(python), str(ROOT / "wsgi.py")])
    try:
        server.wait_ready()
        user = create_user_over_http(server.url)
        link = {"title": "Trellis", "url": "https://example.org/trellis"}
        created = requests.post(f"{server.url}/{NAME}/items", json=link, headers=user.headers, timeout=30)
        assert created.status_code == 201, created.text
        assert created.json()["url"] == link["url"]
        listed = requests.get(f"{server.url}/{NAME}/items", headers=user.headers, timeout=30).json()
        assert listed["count"] == 1
        paths = requests.get(f"{server.url}/openapi.json", timeout=30).json()["paths"]
        assert set(paths[f"/{NAME}/items"]) == {"get", "post"}
        assert {"400", "409"} <= set(paths[f"/{NAME}/items"]["post"]["responses"])
    finally:
        server.stop()

    # The skeleton's own test, as its author runs it (a database of its own, made by the fixtures).
    output = run([str(python), "-m", "pytest", "-q"], {**env, "TRELLIS_MODULES": ENABLED}, cwd=skeleton, timeout=900)
    assert "6 passed" in output, output
