"""The grading step's start-up: the only folder on the grader's PYTHONPATH is this one, so
Python's `site` imports this `sitecustomize` and nothing of the candidate's copy is on the
path while the interpreter starts (no `sitecustomize`, `usercustomize`, `encodings` or a
module a `.pth` file imports can come from it). Here, once `site` has set up the
environment's paths, the grader's code folders ($AUTORESEARCH_GRADER_PATH: the pristine copy
of the task folder, its repository root and src/, then the task's own PYTHONPATH) go after
the standard library and before site-packages, and a finder first on `sys.meta_path` imports
every module the environment provides (the standard library, site-packages) from there,
never from the copy or the script's folder: a candidate's `statistics/` or `numpy.py` is not
what the grader imports. A protected file of the copy ($AUTORESEARCH_GRADER_PROTECTED: the
task's protected globs, relative to the copy's task folder, the first code folder) is
imported from the copy even where an installed package has its name; modules only the copy
has (the task's own packages) are found there as before. Then the environment's own
`sitecustomize`, if it has one, runs. Set by loop/run/spec.py for the grading step only;
the standard library only, for every Python the task may use (3.8 on)."""
import fnmatch
import importlib.machinery
import importlib.util
import os
import site
import sys
import sysconfig

PATH_ENV = "AUTORESEARCH_GRADER_PATH"
PROTECTED_ENV = "AUTORESEARCH_GRADER_PROTECTED"
HERE = os.path.dirname(os.path.abspath(__file__))


def _real(path):
    return os.path.realpath(path or os.curdir)


def _inside(path, folders):
    real = _real(path)
    return any(real == f or real.startswith(f + os.sep) for f in folders)


def _stdlib_folders():
    names = ("stdlib", "platstdlib")
    paths = sysconfig.get_paths()
    return {_real(paths[n]) for n in names if paths.get(n)}


def _site_folders():
    folders: set = set()
    try:
        folders.update(_real(p) for p in site.getsitepackages())
    except AttributeError:          # an old virtualenv's site.py
        pass
    user = getattr(site, "ENABLE_USER_SITE", False) and site.getusersitepackages()
    if user:
        folders.add(_real(user))
    return folders


def _packages(path):
    """A package folder another environment lends this one through a `.pth` line (a
    layered venv); not a project's own folder an editable install adds (its src/)."""
    return os.path.basename(os.path.normpath(path)) in ("site-packages", "dist-packages")


class EnvironmentFirst:
    """A meta-path finder: a top-level module that the environment itself provides (standard
    library, site-packages) is imported from there, whatever folder comes before them."""

    def __init__(self, paths, code, protected):
        self.paths, self.code, self.protected = paths, code, protected

    def find_spec(self, name, path=None, target=None):
        if path is not None or "." in name:
            return None             # a submodule: its package's own folder finds it
        spec = importlib.machinery.PathFinder.find_spec(name, self.paths)
        if spec is not None and self.code and self._protected(name):
            return None             # the task's own protected module: from the copy
        return spec

    def _protected(self, name):
        ours = importlib.machinery.PathFinder.find_spec(name, self.code)
        origin = getattr(ours, "origin", None)
        folder = _real(self.code[0])
        if not origin or not _inside(origin, {folder}):
            return False
        rel = os.path.relpath(_real(origin), folder).replace(os.sep, "/")
        return any(fnmatch.fnmatchcase(rel, g) or rel == g.rstrip("/") for g in self.protected)

    def invalidate_caches(self):
        pass


def _set_up():
    sys.path[:] = [p for p in sys.path if _real(p) != _real(HERE)]
    stdlib, sites = _stdlib_folders(), _site_folders()
    base = {_real(sys.base_prefix)}
    environment = [p for p in sys.path if p and (_inside(p, stdlib) and not _inside(p, sites)
                                                  or _real(p) in sites or _packages(p)
                                                  or p.endswith(".zip") and _inside(p, base))]
    code = [p for p in os.environ.get(PATH_ENV, "").split(os.pathsep) if p]
    protected = os.environ.get(PROTECTED_ENV, "").split("\n")
    sys.meta_path.insert(0, EnvironmentFirst(environment, code, [g for g in protected if g]))
    at = 0
    for i, p in enumerate(sys.path):
        if p in environment and _real(p) not in sites and not _packages(p):
            at = i + 1
    sys.path[at:at] = [p for p in dict.fromkeys(code) if p not in sys.path]
    return code


def _environments_own(code):
    """Run the `sitecustomize` this one hides (a venv's or the system's), if any."""
    paths = [p for p in sys.path if p not in code and _real(p) != _real(HERE)]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", paths)
    if spec is None or not spec.origin or _real(spec.origin) == _real(__file__):
        return
    own = importlib.util.spec_from_file_location("_environment_sitecustomize", spec.origin)
    if own is not None and own.loader is not None:
        module = importlib.util.module_from_spec(own)
        own.loader.exec_module(module)


try:
    _code = _set_up()
except Exception as exc:     # never grade without it: `site` would only warn and go on
    print(f"error: the grader's start-up failed: {type(exc).__name__}: {exc}", flush=True)
    os._exit(1)
_environments_own(_code)
