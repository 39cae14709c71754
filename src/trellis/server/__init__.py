"""The server wing: speed-ups that replace or reach into a library's internals (eventlet's WSGI server,
werkzeug's form parser, python-engineio/python-socketio's emit path, redis-py's ``GET``).

Each module names in its docstring, and in ``CHECKED`` (distribution name → release), the library
releases whose internals it was checked against. ``tests/test_server_libraries.py`` fails when an
installed library is not of the checked minor release (or is older than the checked one), and exercises
each internal a module relies on, so an upgrade shows what to check again before the range moves.
"""
