"""Trellis Email module.

The Module object lives in :mod:`trellis_email.module` so that importing this package (the pytest
plugin :mod:`trellis_email.testing` does, in every test run) adds no tables to the shared metadata
of an app that did not enable the module.
"""
