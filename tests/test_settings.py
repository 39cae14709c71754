"""Settings from TRELLIS_* variables; secrets generated once into instance/, refused in production."""

import json

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
