"""`make run` installs and initialises only when something calls for it (the second start with
nothing changed served in ~4-8 s on a loaded 2-core machine, against ~105 s of reinstalling before).

The Makefile is asked what it would do (`make -n`, nothing runs) with a virtualenv and an instance folder
of the test's own whose stamps say "installed" and "initialised"; `-W FILE` makes make treat a file as
just changed without touching it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from sqlalchemy.engine import make_url

from trellis.testing.ports import free_port

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def plan(venv: Path, instance: Path, *args: str, **env: str) -> str:
    """The commands `make run` would run (echo lines and all)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TRELLIS_")}
    environment.update(TRELLIS_INSTANCE_PATH=str(instance), **env)
    done = subprocess.run(
        ["make", "-n", f"VENV={venv}", *args, "run"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def url_checksum(url: str) -> str:
    """What the Makefile writes into the stamp for TRELLIS_DATABASE_URL=url (cksum's line)."""
    return subprocess.run(["cksum"], input=url, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture()
def installed(tmp_path: Path) -> tuple[Path, Path]:
    """A virtualenv and an instance folder whose stamps are as a finished first `make run` leaves them."""
    venv, instance = tmp_path / "venv", tmp_path / "instance"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    instance.mkdir()
    (instance / "trellis.db").touch()
    plugins = " ".join(sorted(f"plugins/{p.parent.name}/" for p in ROOT.glob("plugins/*/pyproject.toml")))
    for stamp in (venv / ".trellis-installed", venv / ".trellis-installed-test"):
        stamp.write_text(plugins + "\n")
    (instance / ".trellis-initialised").write_text(url_checksum("") + "\n")
    return venv, instance


def test_nothing_changed_starts_the_server_at_once(installed):
    commands = plan(*installed)
    assert "wsgi.py" in commands
    assert "pip install" not in commands and "trellis init" not in commands


def test_a_changed_package_file_reinstalls_and_initialises(installed):
    commands = plan(*installed, "-W", "plugins/chat/pyproject.toml")
    assert "pip install" in commands and "trellis init" in commands
    assert commands.index("pip install") < commands.index("trellis init") < commands.index("wsgi.py")
    assert "==> installing Trellis" in commands  # the step says what it does


def test_a_new_migration_initialises_without_installing(installed):
    migration = next(ROOT.glob("plugins/*/trellis_*/migrations/versions/*.py")).relative_to(ROOT)
    commands = plan(*installed, "-W", str(migration))
    assert "trellis init" in commands and "pip install" not in commands


def test_a_module_added_or_removed_reinstalls(installed):
    venv, instance = installed
    (venv / ".trellis-installed").write_text("plugins/chat/\n")
    assert "pip install" in plan(venv, instance)


def test_another_database_or_a_missing_sqlite_file_initialises(installed):
    venv, instance = installed
    assert "trellis init" in plan(venv, instance, TRELLIS_DATABASE_URL="postgresql://127.0.0.1/other")
    (instance / "trellis.db").unlink()
    assert "trellis init" in plan(venv, instance)


def test_soak_runs_the_soak_tests_on_both_databases_with_their_long_budget(installed):
    venv, _ = installed
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TRELLIS_")}

    def commands(target: str) -> str:
        done = subprocess.run(
            ["make", "-n", f"VENV={venv}", target],
            cwd=ROOT,
            env=environment,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout

    soak = commands("soak")
    for database in ("sqlite", "postgresql"):
        assert f"TRELLIS_TEST_DB={database} TRELLIS_SOAK=1 {venv}/bin/python -m pytest" in soak
    assert soak.count("-m soak") == 2 and soak.count(" & ") == 2  # both passes at once
    suite = commands("test")
    assert "TRELLIS_SOAK" not in suite and "-m soak" not in suite  # make test runs them too, with their small budget


# ---- `make run` itself, from a fresh clone -----------------------------------------------------------------
#
# The clone is a copy of the checkout's tracked files. Its virtualenv is a folder of two launchers for the
# Python and flask of the one running these tests, with install stamps naming the current plugins: nothing
# is installed (and with no pip there, nothing could be).

SECRETS = {"TRELLIS_MASTER_KEY": "m" * 32, "TRELLIS_SECRET_KEY": "s" * 43}


def fresh_clone(tmp_path: Path) -> tuple[Path, Path]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    clone, venv = tmp_path / "clone", tmp_path / "venv"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        source, target = ROOT / name, clone / name
        if source.is_symlink() or source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target, follow_symlinks=False)
    (venv / "bin").mkdir(parents=True)
    for tool, real in (("python", Path(sys.executable)), ("flask", Path(sys.executable).with_name("flask"))):
        launcher = venv / "bin" / tool
        launcher.write_text(f'#!/bin/sh\nexec "{real}" "$@"\n')
        launcher.chmod(0o755)
    plugins = " ".join(sorted(f"plugins/{p.parent.name}/" for p in clone.glob("plugins/*/pyproject.toml")))
    for stamp in (venv / ".trellis-installed", venv / ".trellis-installed-test"):
        stamp.write_text(plugins + "\n")
    return clone, venv


def run_env(port: int, **env: str) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TRELLIS_")}
    environment.update(TRELLIS_PASSWORD_PROFILE="test", PORT=str(port), **env)
    return environment


def make_run_serves(clone: Path, venv: Path, env: dict[str, str], log: Path) -> str:
    """``make run`` until /health answers 200, then Ctrl-C (SIGINT to its process group); its output."""
    url = f"http://127.0.0.1:{env['PORT']}/health"
    with open(log, "w") as out:
        make = subprocess.Popen(
            ["make", f"VENV={venv}", "run"],
            cwd=clone,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and make.poll() is None:
                try:
                    if requests.get(url, timeout=2).status_code == 200:
                        break
                except requests.RequestException:
                    pass
                time.sleep(0.2)
            assert make.poll() is None, f"make run ended ({make.returncode}):\n{log.read_text()}"
            assert requests.get(url, timeout=5).status_code == 200, log.read_text()
        finally:
            if make.poll() is None:
                os.killpg(make.pid, signal.SIGINT)
                try:
                    make.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(make.pid, signal.SIGKILL)
                    make.wait(10)
    return log.read_text()


@pytest.fixture()
def postgresql_database() -> Iterator[str]:
    """A database of this test's own, created empty and dropped after."""
    psycopg2 = pytest.importorskip("psycopg2")
    admin = make_url(os.environ.get("TRELLIS_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"))
    try:
        connection = psycopg2.connect(admin.render_as_string(hide_password=False), connect_timeout=5)
    except psycopg2.OperationalError as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"PostgreSQL is unreachable: {exc}", pytrace=False)
        pytest.skip(f"PostgreSQL is unreachable: {exc}")
    connection.autocommit = True
    name = f"trellis_make_run_{uuid.uuid4().hex[:8]}"
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE DATABASE "{name}"')
    try:
        yield admin.set(database=name).render_as_string(hide_password=False)
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.close()


@pytest.mark.live
@pytest.mark.long
def test_make_run_the_production_way_serves_twice(tmp_path, postgresql_database):
    """The database URL and the secrets from the environment, so nothing writes instance/secrets.json: the
    first run initialises and serves, the second serves without initialising again."""
    clone, venv = fresh_clone(tmp_path)
    env = run_env(free_port(), TRELLIS_DATABASE_URL=postgresql_database, **SECRETS)
    first = make_run_serves(clone, venv, env, tmp_path / "first.log")
    assert "flask trellis init" in first and "created the first administrator" in first, first
    stamp = clone / "instance" / ".trellis-initialised"
    assert stamp.exists(), first
    assert postgresql_database not in stamp.read_text()  # a checksum, not the URL and its password
    assert not (clone / "instance" / "secrets.json").exists()
    again = make_run_serves(clone, venv, env, tmp_path / "again.log")
    assert "flask trellis init" not in again, again


@pytest.mark.live
@pytest.mark.long
def test_make_run_with_an_instance_folder_that_does_not_exist_yet(tmp_path):
    """The default SQLite file in a TRELLIS_INSTANCE_PATH that is nowhere yet (with a space in its name),
    the secrets from the environment: the folder is created, and the stamp is in it."""
    clone, venv = fresh_clone(tmp_path)
    instance = tmp_path / "var" / "trellis data"
    env = run_env(free_port(), TRELLIS_INSTANCE_PATH=str(instance), **SECRETS)
    output = make_run_serves(clone, venv, env, tmp_path / "run.log")
    assert "created the first administrator" in output, output
    assert (instance / "trellis.db").exists() and (instance / ".trellis-initialised").exists()
    assert not (clone / "instance").exists()
    assert "trellis init" not in plan(venv, instance, **SECRETS)  # the stamp is found where it was written


@pytest.mark.live
def test_a_database_not_created_yet_is_one_line_with_the_command_that_creates_it(tmp_path, postgresql_database):
    clone, venv = fresh_clone(tmp_path)
    name = f"{make_url(postgresql_database).database}_missing"  # unique: the other database's pass runs too
    missing = make_url(postgresql_database).set(database=name)
    url = missing.render_as_string(hide_password=False)
    env = run_env(free_port(), TRELLIS_DATABASE_URL=url, **SECRETS)
    done = subprocess.run(
        ["make", f"VENV={venv}", "run"], cwd=clone, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0 and "Traceback" not in output, output
    (line,) = [line for line in output.splitlines() if "does not exist" in line]
    assert f'the database "{name}"' in line, line
    command = shlex.split(line.split("create it with: ", 1)[1])
    assert command[0] == "createdb" and command[-1] == name, line
    assert not (clone / "instance" / ".trellis-initialised").exists()
    if shutil.which("createdb"):  # the command given works as written
        created = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
        try:
            assert created.returncode == 0, created.stderr
        finally:
            subprocess.run(["dropdb", "--if-exists", *command[1:]], capture_output=True, timeout=30, check=False)
