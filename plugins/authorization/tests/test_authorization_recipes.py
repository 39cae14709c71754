"""The recipes of docs/access.md run as written: every step of every block, in order, against the real
application. The blocks are the only copy of the steps, so the page cannot drift from what runs.

A block follows ``<!-- recipe: <name> -->``; blocks with the same name run together, in order. A step is
``<who>: <METHOD> <path>``, an optional JSON body on the next lines, and ``→ <status> [<json>] [as <name>]``
(see the page's "Recipes" section for how to read them).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from trellis_authentication.testing import create_user_with_client

DOC = Path(__file__).resolve().parents[3] / "docs" / "access.md"
BLOCK = re.compile(r"<!-- recipe: ([\w-]+) -->\s*```text\n(.*?)```", re.S)
REQUEST = re.compile(r"^(\w+): (GET|POST|PUT|PATCH|DELETE) (\S+)$")
EXPECT = re.compile(r"^→ (\d{3})(?: ([\[{].*?))?(?: as (\w+))?$", re.S)
PLACEHOLDER = re.compile(r"\{(\w+)(?:\.(\w+))?\}")


@dataclass
class Step:
    who: str
    method: str
    path: str
    body: str | None
    status: int
    expected: str | None
    name: str | None
    line: str


@dataclass
class Recipe:
    name: str
    steps: list[Step] = field(default_factory=list)


def parse(text: str) -> dict[str, Recipe]:
    recipes: dict[str, Recipe] = {}
    for name, block in BLOCK.findall(text):
        recipe = recipes.setdefault(name, Recipe(name))
        lines = [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
        while lines:
            request = REQUEST.match(lines.pop(0))
            assert request, f"{name}: not a request line"
            collected: list[str] = []
            while not lines[0].startswith("→"):
                collected.append(lines.pop(0))
            answer = [lines.pop(0)]
            while lines and not REQUEST.match(lines[0]):
                answer.append(lines.pop(0))  # an expected answer written over several lines
            expect = EXPECT.match(" ".join(part.strip() for part in answer))
            assert expect, f"{name}: cannot read {answer}"
            recipe.steps.append(
                Step(
                    who=request.group(1),
                    method=request.group(2),
                    path=request.group(3),
                    body="\n".join(collected) or None,
                    status=int(expect.group(1)),
                    expected=expect.group(2),
                    name=expect.group(3),
                    line=request.group(0),
                )
            )
    return recipes


RECIPES = parse(DOC.read_text())


def contains(answer: Any, expected: Any) -> bool:
    """Objects: the expected keys with matching values (more keys are fine); anything else: equal."""
    if isinstance(expected, dict):
        return isinstance(answer, dict) and all(k in answer and contains(answer[k], v) for k, v in expected.items())
    return answer == expected


class Runner:
    def __init__(self, client: Any, admin_headers: dict[str, str]) -> None:
        self.client, self.admin = client, admin_headers
        self.values: dict[str, Any] = {}
        self.users: dict[str, Any] = {}

    def user(self, name: str) -> Any:
        if name not in self.users:
            self.users[name] = create_user_with_client(self.client, f"{name}-{uuid.uuid4().hex[:8]}@example.com")
            self.values[name] = {"_id": self.users[name].id}
        return self.users[name]

    def fill(self, text: str) -> str:
        for name in {m.group(1) for m in PLACEHOLDER.finditer(text)}:
            if name not in self.values and name not in ("admin", "anyone"):
                self.user(name)  # a user named in a placeholder before their first request

        def value(match: re.Match[str]) -> str:
            found = self.values[match.group(1)]
            return str(found[match.group(2) or "_id"])

        return PLACEHOLDER.sub(value, text)

    def run(self, step: Step) -> None:
        headers = {"admin": self.admin, "anyone": {}}.get(step.who)
        if headers is None:
            headers = self.user(step.who).headers
        body = json.loads(self.fill(step.body)) if step.body else None
        path = self.fill(step.path)
        response = self.client.open(path, method=step.method, headers=headers, json=body)
        answer = response.get_json()
        assert response.status_code == step.status, (step.line, answer)
        if step.expected:
            assert contains(answer, json.loads(self.fill(step.expected))), (step.line, answer)
        if step.name:
            self.values[step.name] = answer


def test_the_page_has_the_three_recipes():
    assert set(RECIPES) == {"private-notes", "team-workspace", "project-tasks"}
    assert all(len(recipe.steps) >= 8 for recipe in RECIPES.values())
    assert any(
        step.path.startswith("/admin/authorization/permissions/evaluate") for step in RECIPES["project-tasks"].steps
    )


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_recipe_runs_as_written(name, client, admin_headers):
    runner = Runner(client, admin_headers)
    for step in RECIPES[name].steps:
        runner.run(step)
