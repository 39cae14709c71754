"""The Trellis side of ``bench.peer_bench --triggers``: one trivial before- and after-trigger per write,
the equivalent of ``triggers.js`` on Parse's side."""

from trellis_functions import after_create, after_update, before_create, before_update


@before_create("Item")
@before_update("Item")
def stamp(ctx, doc, previous=None):
    doc["stamped"] = True


@after_create("Item")
@after_update("Item")
def noted(ctx, doc, previous=None):
    pass
