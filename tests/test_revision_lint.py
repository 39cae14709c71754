"""``flask trellis db revision --module`` writes a revision that passes the project's ruff settings.

The tiny module (tests/tiny_module) gains two columns and is installed with pip into a private folder
whose ``pyproject.toml`` extends this repository's ruff configuration (``trellis`` is first-party there,
as for the modules under plugins/); the revision generated for it must pass ``ruff check`` and
``ruff format --check`` under those settings, untouched.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEXT_COLUMN = "    text: Mapped[str] = mapped_column(String(200))\n"
# A nullable string, and a column of a trellis type (so the revision needs `import trellis.db`).
NEW_COLUMNS = (
    "    note: Mapped[str | None] = mapped_column(String(400))\n"
    "    noted_at: Mapped[datetime | None] = mapped_column(db.UTCDateTime(), index=True)\n"
)


def run(command: list[str], env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.long
def test_a_generated_revision_passes_ruff_check_and_format(tmp_path, module_cli_env):
    source = tmp_path / "tiny_module"
    shutil.copytree(ROOT / "tests" / "tiny_module", source)
    package = source / "trellis_tiny" / "__init__.py"
    code = package.read_text()
    assert TEXT_COLUMN in code
    code = code.replace("from pathlib import Path\n", "from datetime import datetime\nfrom pathlib import Path\n")
    package.write_text(code.replace(TEXT_COLUMN, TEXT_COLUMN + NEW_COLUMNS))
    (tmp_path / "pyproject.toml").write_text(f'[tool.ruff]\nextend = "{ROOT / "pyproject.toml"}"\n')
    env = module_cli_env(source)
    target = tmp_path / "site"  # where module_cli_env installs it
    flask = [sys.executable, "-m", "flask", "--app", str(ROOT / "wsgi.py"), "trellis"]
    upgraded = run([*flask, "db", "upgrade"], env)
    assert upgraded.returncode == 0, upgraded.stderr
    generated = run([*flask, "db", "revision", "--module", "tiny", "-m", "notes get a note and its time"], env)
    assert generated.returncode == 0, generated.stderr
    revision = target / "trellis_tiny" / "migrations" / "versions" / "0002_notes_get_a_note_and_its_time.py"
    assert f"wrote {revision}" in generated.stdout
    script = revision.read_text()
    assert 'revision = "tiny_0002"' in script and 'down_revision = "tiny_0001"' in script
    assert "import trellis.db\n" in script and "trellis.db.UTCDateTime(" in script
    assert 'sa.Column("note", sa.String(length=400), nullable=True)' in script

    ruff = [sys.executable, "-m", "ruff"]  # installed with the test extras
    checked = run([*ruff, "check", "--no-cache", str(revision)], env, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    formatted = run([*ruff, "format", "--check", "--no-cache", str(revision)], env, cwd=tmp_path)
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr
