"""sonde_build - the Python package's build backend (PEP 517), in the tree and with no
requirement, so that `pip install .` and `pip wheel .` work offline on any interpreter that has
pip, setuptools or not (the pyenv 3.12 and 3.13 builds have none).

    pip install .                  # from a clone: builds the extension for this interpreter
    pip wheel . -w dist/           # a wheel for this interpreter, to install elsewhere

The extension (sonde._sonde, with libsonde and the `sonde` command's code inside) is built by CMake
for the interpreter running pip (sys.executable), in build-pip/<python tag>/ of the source tree, or,
where the user cannot write the tree, in $XDG_CACHE_HOME (~/.cache)/sonde-build/ (a temporary folder
where neither can be written); the wheel holds the package, its metadata (the version from
CMakeLists.txt's project()), and the `sonde` console script (sonde.__main__:entry). The C libraries
sonde links (zlib, libyaml, libdw, libelf, jansson) must be installed where the wheel is (Debian:
scripts/setup.sh names them). A build failure raises with the end of CMake's log.
"""

import base64
import hashlib
import io
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile

NAME = "sonde"
SUMMARY = "Profiler for ML inference and training pipelines: libsonde for Python"
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _version():
    with open(os.path.join(_ROOT, "CMakeLists.txt")) as f:
        m = re.search(r"project\(sonde VERSION ([0-9.]+)", f.read())
    if not m:
        raise RuntimeError("sonde_build: no `project(sonde VERSION x.y.z)` in CMakeLists.txt")
    return m.group(1)


def _tags():
    """(python, abi, platform) of the interpreter running the build: cp311, cp311,
    linux_x86_64."""
    py = "cp%d%d" % sys.version_info[:2]
    abi = py + ("t" if sysconfig.get_config_var("Py_GIL_DISABLED") else "")
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return py, abi, plat


def _metadata():
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\nRequires-Python: >=3.8\n"
            "License: see the source tree\n" % (NAME, _version(), SUMMARY))


def _dist_info(files):
    """The .dist-info files (name -> bytes) of the wheel, RECORD last."""
    d = "%s-%s.dist-info" % (NAME, _version())
    py, abi, plat = _tags()
    files[d + "/METADATA"] = _metadata().encode()
    files[d + "/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: sonde_build\nRoot-Is-Purelib: false\n"
                           "Tag: %s-%s-%s\n" % (py, abi, plat)).encode()
    files[d + "/entry_points.txt"] = b"[console_scripts]\nsonde = sonde.__main__:entry\n"
    files[d + "/top_level.txt"] = b"sonde\n"
    rows = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append("%s,sha256=%s,%d" % (name, digest, len(data)))
    rows.append(d + "/RECORD,,")
    files[d + "/RECORD"] = ("\n".join(rows) + "\n").encode()
    return d


def _writable(d):
    """Whether this user can make a folder in d (os.access says yes to root on a read-only
    mount; a try says it for everyone)."""
    try:
        os.makedirs(d, exist_ok=True)
        probe = tempfile.mkdtemp(prefix=".sonde-probe-", dir=d)
        os.rmdir(probe)
        return True
    except OSError:
        return False


def _build_root():
    """Where CMake builds: build-pip/ in the source tree when this user can write it; else a
    folder of the user's cache named after the tree (kept, so a second install builds only
    what changed); else a temporary one."""
    inside = os.path.join(_ROOT, "build-pip")
    if _writable(inside):
        return inside
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    tag = hashlib.sha256(_ROOT.encode()).hexdigest()[:12]
    mine = os.path.join(cache, "sonde-build", tag)
    if _writable(mine):
        return mine
    return tempfile.mkdtemp(prefix="sonde-build-")


def _build_extension():
    """CMake's build of the package for sys.executable; returns the package's directory."""
    py = _tags()[0]
    out = os.path.join(_build_root(), py)
    log = out + ".log"
    os.makedirs(os.path.dirname(out), exist_ok=True)
    steps = [["cmake", "-S", _ROOT, "-B", out, "-DCMAKE_BUILD_TYPE=Release",
              "-DSONDE_BUILD_TESTS=OFF", "-DSONDE_BUILD_BENCH=OFF", "-DSONDE_BUILD_EXAMPLES=OFF",
              "-DPython3_EXECUTABLE=" + sys.executable],
             ["cmake", "--build", out, "-j", str(os.cpu_count() or 2), "--target", "sonde_python",
              "sonde_python_files", "sonde_python_preload"]]
    with open(log, "w") as f:
        for cmd in steps:
            try:
                rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT)
            except OSError as e:
                raise RuntimeError("sonde_build: cannot run %s (%s): CMake and a C compiler are "
                                   "needed (scripts/setup.sh installs them)" % (cmd[0], e))
            if rc != 0:
                f.flush()
                with open(log) as g:
                    tail = g.read()[-3000:]
                raise RuntimeError("sonde_build: `%s` failed (exit %d); the end of %s:\n%s"
                                   % (" ".join(cmd), rc, log, tail))
    pkg = os.path.join(out, "python", "sonde")
    if not [n for n in os.listdir(pkg) if n.startswith("_sonde.") and n.endswith(".so")]:
        raise RuntimeError("sonde_build: CMake built no sonde/_sonde*.so in %s (see %s)"
                           % (pkg, log))
    return pkg


def _package_files(pkg):
    files = {}
    for dirpath, _, names in os.walk(pkg):
        for n in sorted(names):
            if n.endswith((".py", ".so")) and "__pycache__" not in dirpath:
                path = os.path.join(dirpath, n)
                rel = os.path.relpath(path, os.path.dirname(pkg)).replace(os.sep, "/")
                with open(path, "rb") as f:
                    files[rel] = f.read()
    return files


# -- PEP 517 hooks ----------------------------------------------------------------------------
def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    files = {}
    d = _dist_info(files)
    for name, data in files.items():
        if name.startswith(d + "/") and not name.endswith("/RECORD"):
            path = os.path.join(metadata_directory, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
    return d


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = _package_files(_build_extension())
    _dist_info(files)
    py, abi, plat = _tags()
    name = "%s-%s-%s-%s-%s.whl" % (NAME, _version(), py, abi, plat)
    path = os.path.join(wheel_directory, name)
    with zipfile.ZipFile(path + ".tmp", "w", zipfile.ZIP_DEFLATED) as z:
        for n, data in files.items():
            info = zipfile.ZipInfo(n, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if n.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    os.replace(path + ".tmp", path)
    return name


def build_sdist(sdist_directory, config_settings=None):
    """The tracked source tree (git ls-files) as NAME-VERSION.tar.gz."""
    base = "%s-%s" % (NAME, _version())
    try:
        listed = subprocess.check_output(["git", "-C", _ROOT, "ls-files", "-z"]).split(b"\0")
    except (OSError, subprocess.CalledProcessError) as e:
        raise RuntimeError("sonde_build: an sdist is made from a git checkout (%s)" % e)
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in listed:
            if rel:
                rel = rel.decode()
                t.add(os.path.join(_ROOT, rel), arcname=base + "/" + rel, recursive=False)
        info = tarfile.TarInfo(base + "/PKG-INFO")
        data = _metadata().encode()
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return name
