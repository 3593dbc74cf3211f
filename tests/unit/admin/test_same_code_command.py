"""A broker the local tools start runs the code of the process that starts it.

``python -m`` puts the working directory first on ``sys.path``. Started from a directory that holds
another ``headwater`` (the repository root, while a benchmark compares an old checkout named by
``PYTHONPATH`` with the new code), a plain ``python -m headwater`` imports that one instead.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import headwater
from headwater.admin.local import same_code_command


def _shadow(tmp_path: Path) -> Path:
    (tmp_path / "headwater").mkdir()
    (tmp_path / "headwater" / "__init__.py").write_text('raise SystemExit("the copy in the working directory")\n')
    return tmp_path


def test_a_copy_in_the_working_directory_shadows_plain_python_m(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(_shadow(tmp_path))
    done = subprocess.run([sys.executable, "-m", "headwater", "--help"], capture_output=True, text=True, timeout=60)
    assert "the copy in the working directory" in done.stderr


def test_the_started_process_imports_this_process_headwater(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(_shadow(tmp_path))
    command, env = same_code_command("--help")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Usage:" in done.stdout
    probe = [command[0], "-P", "-c", "import headwater; print(headwater.__file__)"]
    where = subprocess.run(probe, env=env, capture_output=True, text=True, timeout=60).stdout.strip()
    assert Path(where).resolve() == Path(headwater.__file__).resolve()
