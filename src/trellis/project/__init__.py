"""Project as code: the state administrators build (schemas, access definitions, templates, forms, module
configuration) exported as one JSON document, planned against a server and applied to it all or nothing.

Modules take part through the ``trellis_project_parts`` hook (:class:`parts.ProjectPart`); the core adds
every module's configuration. ``docs/operations.md`` ("Promoting a project") shows the workflow.
"""

from .parts import Change, ProjectInvalid, ProjectPart, invalid, taking_part

__all__ = ["Change", "ProjectInvalid", "ProjectPart", "invalid", "taking_part"]
