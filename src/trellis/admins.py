"""Administrator accounts: create, reset password, and the first admin on a fresh install."""

from __future__ import annotations

import secrets

from flask import current_app
from sqlalchemy import func, select

from . import audit, db
from .errors import conflict, not_found
from .models import Admin
from .passwords import hash_password

MIN_PASSWORD_LENGTH = 8


def create_admin(username: str, password: str) -> Admin:
    if db.session.execute(select(Admin).where(Admin.username == username)).scalar_one_or_none():
        raise conflict(f"An administrator named {username!r} already exists")
    admin = Admin(id=db.new_id(), username=username, password_hash=hash_password(password))
    db.session.add(admin)
    audit.record("core", "admin.create", admin.id, {"username": username})
    db.session.commit()
    return admin


def reset_password(username: str, password: str) -> Admin:
    admin = db.session.execute(select(Admin).where(Admin.username == username)).scalar_one_or_none()
    if admin is None:
        raise not_found(f"No administrator named {username!r}")
    admin.password_hash = hash_password(password)
    admin.token_version += 1  # tokens issued before the reset stop working
    audit.record("core", "admin.passwordReset", admin.id, {"username": username})
    db.session.commit()
    return admin


def ensure_first_admin() -> str | None:
    """Create the first admin when there is none. Returns a generated password (to print once)."""
    if db.session.execute(select(func.count()).select_from(Admin)).scalar_one():
        return None
    username = current_app.config["ADMIN_USERNAME"]
    password = current_app.config.get("ADMIN_PASSWORD")
    generated = None
    if not password:
        password = generated = secrets.token_urlsafe(12)
    create_admin(username, password)
    return generated
