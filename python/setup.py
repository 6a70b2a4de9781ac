"""Build of gradwire._core, the C extension under the gradwire package.

pyproject.toml holds the package's metadata; this file says where
libgradwire comes from, in this order:

1. GRADWIRE_BUILD_DIR, a CMake build directory of this repository: its
   libgradwire.so and the repository's include/ (what CI and the Debian
   packages build against). The extension gets a RUNPATH to that directory
   (the library is not installed anywhere) unless GRADWIRE_RPATH=0 (the
   Debian build: there the library is in the system's libdir).
2. pkg-config's gradwire (an installed libgradwire: libgradwire-dev, or
   `cmake --install` with PKG_CONFIG_PATH naming its lib/pkgconfig). A
   library outside the system's directories is given a RUNPATH.
3. ../build of this repository, when it holds libgradwire.so.

The version is the library's: include/gradwire.h's in a checkout, else
pkg-config's. The module must be built for the library it loads.
"""
import os
import re
import shlex
import subprocess
import sys

from setuptools import Extension, setup

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(here)
SYSTEM_LIBDIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64")


def _header_version(header):
    parts = {}
    with open(header) as f:
        for line in f:
            m = re.match(r"#define GW_VERSION_(MAJOR|MINOR|PATCH) (\d+)", line)
            if m:
                parts[m.group(1)] = m.group(2)
    return "%s.%s.%s" % (parts["MAJOR"], parts["MINOR"], parts["PATCH"])


def _pkg_config(*args):
    try:
        out = subprocess.run(["pkg-config"] + list(args) + ["gradwire"], check=True,
                             capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()


def _in_tree(build):
    lib = os.path.join(build, "libgradwire.so")
    header = os.path.join(repo, "include", "gradwire.h")
    if not os.path.exists(lib):
        sys.exit("gradwire: GRADWIRE_BUILD_DIR=%s holds no libgradwire.so "
                 "(cmake --build %s --target gradwire)" % (build, build))
    if not os.path.exists(header):
        sys.exit("gradwire: %s is missing: an in-tree build needs the repository" % header)
    rpath = [] if os.environ.get("GRADWIRE_RPATH", "1") == "0" else [build]
    return dict(include_dirs=[os.path.join(repo, "include")], library_dirs=[build],
                libraries=["gradwire"], runtime_library_dirs=rpath), _header_version(header)


def _installed():
    version = _pkg_config("--modversion")
    if version is None:
        return None
    cflags = shlex.split(_pkg_config("--cflags"))
    libs = shlex.split(_pkg_config("--libs"))
    libdir = (_pkg_config("--variable=libdir") or "").rstrip("/")
    # The system's directories, multiarch ones (/usr/lib/<triplet>) included,
    # need no search path in the extension.
    system = libdir in SYSTEM_LIBDIRS or os.path.dirname(libdir) in SYSTEM_LIBDIRS
    if os.environ.get("GRADWIRE_RPATH", "1") == "0":
        system = True
    return dict(include_dirs=[f[2:] for f in cflags if f.startswith("-I")],
                library_dirs=[f[2:] for f in libs if f.startswith("-L")],
                libraries=[f[2:] for f in libs if f.startswith("-l")],
                runtime_library_dirs=[] if system else [libdir]), version


def _library():
    build = os.environ.get("GRADWIRE_BUILD_DIR")
    if build:
        return _in_tree(os.path.abspath(build))
    found = _installed()
    if found:
        return found
    if os.path.exists(os.path.join(repo, "build", "libgradwire.so")):
        return _in_tree(os.path.join(repo, "build"))
    sys.exit("gradwire: libgradwire not found: install libgradwire-dev (pkg-config gradwire), "
             "or set GRADWIRE_BUILD_DIR to a CMake build directory of the repository")


# Metadata and the sdist need no library (pip asks for metadata before it
# builds); every build does.
_builds = {"build", "build_ext", "bdist_wheel", "install", "develop", "editable_wheel",
           "bdist_egg"}
_meta_only = not _builds.intersection(sys.argv[1:])
_header = os.path.join(repo, "include", "gradwire.h")
if _meta_only and os.path.exists(_header):
    flags, version = {}, _header_version(_header)
elif _meta_only and _pkg_config("--modversion"):
    flags, version = {}, _pkg_config("--modversion")
else:
    flags, version = _library()

sources = sorted(os.path.join("src", f) for f in os.listdir(os.path.join(here, "src"))
                 if f.endswith(".c"))
setup(
    version=version,
    ext_modules=[Extension("gradwire._core", sources=sources, depends=["src/core.h"],
                           define_macros=[("_GNU_SOURCE", None)],
                           extra_compile_args=["-std=c11", "-fvisibility=hidden"], **flags)],
)
