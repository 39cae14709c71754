"""Settings from TRELLIS_* variables; secrets generated once into instance/, refused in production."""

import json
import re

import pytest
from flask import Flask

from trellis.settings import SettingsError, load_settings


def make(tmp_path, **overrides):
    app = Flask("t", instance_path=str(tmp_path / "instance"))
    load_settings(app, overrides or None)
    return app


def test_secrets_are_generated_once_and_reused(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("TRELLIS_MASTER_KEY", raising=False)
    monkeypatch.delenv("TRELLIS_SECRET_KEY", raising=False)
    first = make(tmp_path)
    printed = capsys.readouterr().out
    assert first.config["MASTER_KEY"] in printed  # shown once, on the start that made it
    stored = json.loads((tmp_path / "instance" / "secrets.json").read_text())
    assert stored == {"MASTER_KEY": first.config["MASTER_KEY"], "SECRET_KEY": first.config["SECRET_KEY"]}
    assert (tmp_path / "instance" / "secrets.json").stat().st_mode & 0o777 == 0o600
    second = make(tmp_path)
    assert capsys.readouterr().out == ""
    assert second.config["MASTER_KEY"] == first.config["MASTER_KEY"]
    assert second.config["JWT_SECRET_KEY"] == first.config["SECRET_KEY"]


def test_environment_variables_win(tmp_path, monkeypatch):
    monkeypatch.setenv("TRELLIS_MASTER_KEY", "from-env")
    monkeypatch.setenv("TRELLIS_SECRET_KEY", "secret-from-env")
    monkeypatch.setenv("TRELLIS_ADMIN_TOKEN_HOURS", "2.5")
    app = make(tmp_path)
    assert app.config["MASTER_KEY"] == "from-env"
    assert app.config["ADMIN_TOKEN_HOURS"] == 2.5
    assert app.config["DATABASE_URL"] == f"sqlite:///{tmp_path / 'instance' / 'trellis.db'}"
    assert not (tmp_path / "instance" / "secrets.json").exists()


def test_production_refuses_to_generate_secrets(tmp_path, monkeypatch):
    monkeypatch.delenv("TRELLIS_MASTER_KEY", raising=False)
    monkeypatch.delenv("TRELLIS_SECRET_KEY", raising=False)
    monkeypatch.setenv("TRELLIS_ENV", "production")
    with pytest.raises(SettingsError, match="TRELLIS_MASTER_KEY, TRELLIS_SECRET_KEY"):
        make(tmp_path)
    assert not (tmp_path / "instance").exists()


def test_proxy_count_trusts_forwarded_client_addresses(app_config, db):
    from flask import request

    from trellis import create_app

    for proxies, expected in ((0, "127.0.0.1"), (1, "203.0.113.9")):
        app = create_app({**app_config, "PROXY_COUNT": proxies}, modules=[])
        app.add_url_rule("/ip", "ip", lambda: {"ip": request.remote_addr})
        seen = app.test_client().get("/ip", headers={"X-Forwarded-For": "203.0.113.9"}).get_json()
        assert seen == {"ip": expected}


def test_secrets_made_of_digits_stay_strings(tmp_path, monkeypatch):
    monkeypatch.setenv("TRELLIS_MASTER_KEY", "123456")
    monkeypatch.setenv("TRELLIS_SECRET_KEY", "98765432109876543210987654321098")
    app = make(tmp_path)
    assert app.config["MASTER_KEY"] == "123456"
    assert app.config["JWT_SECRET_KEY"] == "98765432109876543210987654321098"


def test_trusted_hosts_and_public_url_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TRELLIS_TRUSTED_HOSTS", "api.example.com, .example.org")
    monkeypatch.setenv("TRELLIS_PUBLIC_URL", "https://api.example.com/")
    app = make(tmp_path)
    assert app.config["TRUSTED_HOSTS"] == ["api.example.com", ".example.org"]  # a list, as Flask expects
    assert app.config["PUBLIC_URL"] == "https://api.example.com"


@pytest.mark.parametrize("value", ["api.example.com", "ftp://api.example.com", "https://api.example.com/?x=1"])
def test_a_public_url_that_is_not_an_absolute_http_url_is_refused(tmp_path, monkeypatch, value):
    monkeypatch.setenv("TRELLIS_PUBLIC_URL", value)
    with pytest.raises(SettingsError, match="TRELLIS_PUBLIC_URL"):
        make(tmp_path)


@pytest.mark.parametrize(
    ("name", "value"),
    [("HEADER_TIMEOUT", "0"), ("IDLE_TIMEOUT", "-1"), ("IDLE_TIMEOUT", "soon"), ("MAX_CONNECTIONS", "10.5")],
)
def test_connection_limits_must_be_positive_numbers(tmp_path, monkeypatch, name, value):
    monkeypatch.setenv(f"TRELLIS_{name}", value)
    with pytest.raises(SettingsError, match=f"TRELLIS_{name} must be a"):
        make(tmp_path)


def test_connection_limits_read_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TRELLIS_HEADER_TIMEOUT", "2.5")
    app = make(tmp_path)
    assert (app.config["HEADER_TIMEOUT"], app.config["IDLE_TIMEOUT"], app.config["MAX_CONNECTIONS"]) == (2.5, 75, 1024)


@pytest.mark.parametrize(
    ("text", "expected"),
    [(word, True) for word in ("true", "TRUE", "1", "yes", "Yes", "on", " ON ")]
    + [(word, False) for word in ("false", "False", "0", "no", "NO", "off", "Off ")],
)
def test_one_boolean_reading_for_every_boolean_setting(tmp_path, monkeypatch, text, expected):
    from trellis.settings import BOOL, CORE

    for setting in CORE:
        if setting.kind is BOOL:
            monkeypatch.setenv(setting.variable, text)
    app = make(tmp_path)
    assert {setting.name: app.config[setting.name] for setting in CORE if setting.kind is BOOL} == {
        setting.name: expected for setting in CORE if setting.kind is BOOL
    }


@pytest.mark.parametrize("text", ["", "sometimes", "2", "y", "t", "truee", "enabled", "1.0"])
def test_anything_else_is_not_a_boolean(tmp_path, monkeypatch, text):
    from trellis.settings import parse_bool

    with pytest.raises(ValueError):
        parse_bool(text)
    monkeypatch.setenv("TRELLIS_METRICS", text)
    with pytest.raises(SettingsError, match="TRELLIS_METRICS must be true or false"):
        make(tmp_path)


def _bad_values():
    """One value each setting of the core refuses, by kind (any text is a text or a list)."""
    from trellis import settings

    bad = {
        settings.BOOL: "sometimes",
        settings.INT: "-1",
        settings.COUNT: "0",
        settings.NUMBER: "soon",
        settings.SECONDS: "nan",
        settings.SECONDS_OR_ZERO: "-0.5",
        settings.URL: "ftp://api.example.com",
    }
    for setting in settings.CORE:
        if setting.kind not in (settings.TEXT, settings.LIST):
            yield setting.name, bad.get(setting.kind, "no-such-option")  # the rest are choices


@pytest.mark.parametrize(("name", "value"), list(_bad_values()))
def test_a_bad_value_of_each_kind_stops_the_start_naming_the_variable(tmp_path, monkeypatch, name, value):
    monkeypatch.setenv(f"TRELLIS_{name}", value)
    with pytest.raises(SettingsError, match=f"^TRELLIS_{name} must be .*, not {re.escape(repr(value))}$"):
        make(tmp_path)
    assert not (tmp_path / "instance").exists()  # refused before anything is generated


def test_a_module_declares_its_own_settings(app_config, db, monkeypatch):
    """Read like the core's: the environment, else the default; a bad value names the variable; a name
    the core declares is refused."""
    from trellis import Module, create_app
    from trellis.settings import COUNT, SECONDS_LIST, Setting

    knobs = Module(
        name="knobs",
        settings=(
            Setting("KNOBS_LIMIT", COUNT, 3, "how many knobs"),
            Setting("KNOBS_DELAYS", SECONDS_LIST, (1.0, 2.0), "delays between turns"),
        ),
    )
    app = create_app(app_config, modules=[knobs])
    assert (app.config["KNOBS_LIMIT"], app.config["KNOBS_DELAYS"]) == (3, (1.0, 2.0))
    monkeypatch.setenv("TRELLIS_KNOBS_LIMIT", "7")
    monkeypatch.setenv("TRELLIS_KNOBS_DELAYS", "0.5, 4")
    app = create_app(app_config, modules=[knobs])
    assert (app.config["KNOBS_LIMIT"], app.config["KNOBS_DELAYS"]) == (7, (0.5, 4.0))
    assert create_app({**app_config, "KNOBS_LIMIT": 9}, modules=[knobs]).config["KNOBS_LIMIT"] == 9
    monkeypatch.setenv("TRELLIS_KNOBS_DELAYS", "0.5,soon")
    with pytest.raises(SettingsError, match="TRELLIS_KNOBS_DELAYS must be a comma-separated list of seconds"):
        create_app(app_config, modules=[knobs])
    taken = Module(name="taken", settings=(Setting("REDIS_URL", COUNT, 1, "a second Redis"),))
    with pytest.raises(SettingsError, match="TRELLIS_REDIS_URL is declared by the core and by taken"):
        create_app(app_config, modules=[taken])


def test_the_readme_tables_are_the_declared_settings():
    from trellis.settings_doc import COMMAND, documents, stale

    differing = stale(documents())
    assert not differing, f"settings tables out of date in {', '.join(map(str, differing))}; run: {COMMAND}"


def test_a_readme_table_that_differs_is_found_and_rewritten(tmp_path):
    from trellis.settings import CORE
    from trellis.settings_doc import BEGIN, END, stale, write

    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{BEGIN}\n| `TRELLIS_GONE` | text | unset | gone |\n{END}\nafter\n")
    assert stale({readme: CORE}) == [readme]
    assert write({readme: CORE}) == [readme]
    text = readme.read_text()
    assert "TRELLIS_GONE" not in text and text.count("| `TRELLIS_") == len(CORE) and text.endswith(f"{END}\nafter\n")
    assert stale({readme: CORE}) == []


def test_the_database_pool_size_bounds_a_process_s_postgresql_connections(app_config, db):
    from trellis import create_app
    from trellis.db import make_engine
    from trellis.reads import ReadConnections

    # Engines do not connect when made: the wiring is checked on either test database.
    engine = make_engine("postgresql://nobody@127.0.0.1:1/none", pool_size=3)
    assert (engine.pool.size(), engine.pool._max_overflow) == (3, 3)
    assert ReadConnections(engine, 1).engine.pool.size() == 1
    app = create_app({**app_config, "DATABASE_POOL_SIZE": 3}, modules=[])
    state = app.extensions["trellis"]
    if state.engine.dialect.name != "postgresql":  # SQLite: one file, no server connections to budget
        assert app.config["DATABASE_POOL_SIZE"] == 3
        return
    # The session's pool and its overflow, and the reads' own pool at half of it: 3 + 3 + 1 + 1.
    assert (state.engine.pool.size(), state.engine.pool._max_overflow) == (3, 3)
    reads = state.reads.engine.pool
    assert (reads.size(), reads._max_overflow) == (1, 1)
    default = create_app(app_config, modules=[]).extensions["trellis"]
    assert (default.engine.pool.size(), default.reads.engine.pool.size()) == (32, 16)
