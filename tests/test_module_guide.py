"""docs/modules.md and ``flask trellis module new``: the guide's example is the skeleton, file by file.

The guide shows what ``module new bookmarks`` writes; the slow test (tests/test_module_scaffold.py)
installs such a skeleton and runs it, so the guide's example is tested code that cannot drift.
"""

import re
from pathlib import Path

from trellis import scaffold

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "modules.md"
# A shown file: `<!-- file: PATH -->` right above a fenced block.
SHOWN_FILE = re.compile(r"<!-- file: (?P<path>\S+) -->\n```[a-z]*\n(?P<text>.*?)```\n", re.S)


def run(app, *args):
    return app.test_cli_runner().invoke(args=["trellis", *args])


def test_the_guide_shows_every_skeleton_file_as_module_new_writes_it():
    shown = {match["path"]: match["text"] for match in SHOWN_FILE.finditer(GUIDE.read_text())}
    rendered = scaffold.render("bookmarks")
    assert sorted(shown) == sorted(rendered)
    for path, text in rendered.items():
        assert shown[path] == text, f"docs/modules.md shows an outdated {path}"


def test_module_new_writes_the_skeleton_with_the_name_substituted(app, tmp_path):
    result = run(app, "module", "new", "bird_watch", "--path", str(tmp_path))
    assert result.exit_code == 0, result.output
    target = tmp_path / "trellis-bird_watch"
    written = {str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()}
    assert written == set(scaffold.render("bird_watch"))
    assert "trellis_bird_watch/migrations/versions/0001_bird_watch.py" in written
    pyproject = (target / "pyproject.toml").read_text()
    assert 'bird_watch = "trellis_bird_watch:module"' in pyproject
    models = (target / "trellis_bird_watch" / "models.py").read_text()
    assert '__tablename__ = "bird_watch_items"' in models
    assert "class BirdWatchConfig(" in (target / "trellis_bird_watch" / "config.py").read_text()
    assert not [p for p in written if "{{" in p or "{{" in (target / p).read_text()]


def test_module_new_refuses_bad_names_and_existing_folders(app, tmp_path):
    for bad in ("Greeter", "bird-watch", "2birds", "bird__watch", "class", "x" * 41):
        result = run(app, "module", "new", bad, "--path", str(tmp_path))
        assert result.exit_code != 0
        assert "module name" in result.output or "keyword" in result.output, result.output
    assert list(tmp_path.iterdir()) == []
    assert run(app, "module", "new", "greeter", "--path", str(tmp_path)).exit_code == 0
    again = run(app, "module", "new", "greeter", "--path", str(tmp_path))
    assert again.exit_code != 0
    assert "already exists" in again.output


def test_db_revision_names_what_is_wrong(app):
    unknown = run(app, "db", "revision", "--module", "nonesuch", "-m", "x")
    assert unknown.exit_code != 0
    assert "'nonesuch' is not loaded" in unknown.output
    assert run(app, "db", "revision", "--module", "nonesuch").exit_code != 0  # -m is required
