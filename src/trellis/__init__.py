"""Trellis: a self-hosted modular backend (Flask host + pip-installable modules)."""
from .app import Trellis, create_app
from .modules import Module, OwnedSchema

__all__ = ["create_app", "Trellis", "Module", "OwnedSchema"]
