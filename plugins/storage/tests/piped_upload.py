"""A real uploading process for the kill tests: ``store_upload`` (what the upload routes run after parsing
the form) of this process's stdin, owned by ``argv[1]``; prints the file id once the record is saved.

The server spools a whole request body before it stores a byte, so only a process fed at the test's pace
can be held, or killed, at a chosen point of the write. Settings come from the environment, as a server's.
"""

import sys

from trellis import create_app
from trellis_storage.service import store_upload

app = create_app()
with app.test_request_context():
    record = store_upload(sys.stdin.buffer, "piped.bin", owner=sys.argv[1], folder=None, is_public=False)
print(record.id, flush=True)
