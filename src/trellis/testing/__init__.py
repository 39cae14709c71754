"""Test support: the pytest plugin (fixtures) and the live-server entry point."""
