"""A run's provenance names accelbench's own code: the commit of the repository that tracks the package's source files,
never that of a repository that merely holds them (a user's project around a virtualenv, a copy of the tree), checked
on real temporary git repositories; the working directory's repository is a separate key."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from accelbench.sweep import provenance

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(repo, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A user's project repository (one committed file) holding a package folder ``venv/pkg`` it does not track."""
    monkeypatch.delenv("ACCELBENCH_GIT_COMMIT", raising=False)
    repo = tmp_path / "project"
    pkg = repo / "venv" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("x = 1\n")
    (repo / "main.py").write_text("print()\n")
    git(repo, "init", "-q")
    git(repo, "add", "main.py")
    git(repo, "commit", "-qm", "user's project")
    return repo, pkg


def test_a_package_the_enclosing_repository_does_not_track_has_no_commit(project):
    repo, pkg = project
    assert provenance.cwd_git_commit(repo) == git(repo, "rev-parse", "HEAD")  # the user's commit, in its own key
    assert provenance.git_commit(pkg) is None


def test_a_tracked_package_records_its_commit_dirty_only_for_its_own_files(project):
    repo, pkg = project
    git(repo, "add", "venv/pkg/__init__.py")
    git(repo, "commit", "-qm", "track the package")
    head = git(repo, "rev-parse", "HEAD")
    assert provenance.git_commit(pkg) == head
    (repo / "main.py").write_text("print(1)\n")  # outside the package: its code is unchanged
    assert provenance.git_commit(pkg) == head
    (pkg / "__init__.py").write_text("x = 2\n")
    assert provenance.git_commit(pkg) == f"{head}-dirty"


def test_git_variables_pointing_elsewhere_do_not_change_the_answer(project, tmp_path, monkeypatch):
    """``GIT_DIR`` of the user's shell (another repository) is not asked about the package."""
    repo, pkg = project
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    (other / "venv" / "pkg").mkdir(parents=True)
    (other / "venv" / "pkg" / "__init__.py").write_text("x = 1\n")
    git(other, "add", ".")
    git(other, "commit", "-qm", "tracks a package of the same path")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    assert provenance.git_commit(pkg) is None


def test_outside_any_repository_no_commit_and_a_source_hash(tmp_path, monkeypatch):
    monkeypatch.delenv("ACCELBENCH_GIT_COMMIT", raising=False)
    pkg = tmp_path / "copy" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("x = 1\n")
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "a.pyc").write_bytes(b"compiled")
    assert provenance.git_commit(pkg) is None and provenance.cwd_git_commit(tmp_path) is None
    first = provenance.source_sha256.__wrapped__(pkg)
    (pkg / "__pycache__" / "a.pyc").write_bytes(b"compiled again")  # not source
    assert provenance.source_sha256.__wrapped__(pkg) == first
    (pkg / "__init__.py").write_text("x = 2\n")
    assert provenance.source_sha256.__wrapped__(pkg) != first and len(first) == 64


def test_a_runs_environment_keeps_the_keys_its_readers_use(monkeypatch):
    import torch

    from accelbench.core.version import __version__

    monkeypatch.setenv("ACCELBENCH_GIT_COMMIT", "abc123")
    env = provenance.collect(torch.device("cpu"))
    assert env["accelbench"] == __version__ and env["git_commit"] == "abc123"
    assert env["accelbench_source_sha256"] == provenance.source_sha256() and "cwd_git_commit" in env
