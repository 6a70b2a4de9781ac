#!/usr/bin/env bash
# The Debian package: build it with CPack from BUILD_DIR, check what it
# declares, install it with dpkg into a scratch root (its own dpkg
# database), run the installed tools with no LD_LIBRARY_PATH (they find the
# library through their RUNPATH, $ORIGIN/../lib), build the consumer
# example against the installed files (pkg-config and CMake) and run it on
# 3 ranks with the installed launcher, then remove the package.
# Usage: deb_test.sh SOURCE_DIR BUILD_DIR [SANITIZE]
set -euo pipefail
src="$1"
build="$2"
san_flags=""
if [ "${3:-OFF}" = "ON" ]; then
    san_flags="-fsanitize=address,undefined"
fi
for tool in cpack dpkg dpkg-deb dpkg-shlibdeps pkg-config; do
    command -v "$tool" >/dev/null ||
        { echo "SKIP: $tool is not installed (scripts/install-deps.sh installs dpkg-dev and pkg-config)"; exit 77; }
done
if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: installing a package with dpkg, even into a scratch root, needs root"
    exit 77
fi
tmp="$(mktemp -d /tmp/gw-deb-XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

(cd "$build" && cpack -G DEB -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1) || { cat "$tmp/cpack.log"; fail "cpack"; }
debs=("$tmp"/pkg/gradwire_*.deb)
[ -f "${debs[0]}" ] || fail "cpack made no gradwire_*.deb"
deb=${debs[0]}
version=$(dpkg-deb -f "$deb" Version)
want=$(sed -n 's/^project(gradwire VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[ "$version" = "$want" ] || fail "package version $version, CMakeLists.txt says $want"
[ "$(dpkg-deb -f "$deb" Package)" = gradwire ] || fail "package name"
depends=$(dpkg-deb -f "$deb" Depends)
for lib in libc6 libopenblas0; do
    grep -q "\b$lib\b" <<<"$depends" || fail "Depends ($depends) lacks $lib"
done
# Every dependency must be satisfiable here, as apt would have to.
IFS=',' read -ra entries <<<"$depends"
for entry in "${entries[@]}"; do
    ok=0
    IFS='|' read -ra alts <<<"$entry"
    for alt in "${alts[@]}"; do
        name=$(awk '{print $1}' <<<"$alt")
        status=$(dpkg-query -W -f='${db:Status-Status}' "$name" 2>/dev/null || true)
        [ "$status" = installed ] && ok=1
    done
    [ $ok -eq 1 ] || fail "dependency '$entry' is not installed on this machine"
done
dpkg-deb --contents "$deb" | awk '{print $6}' >"$tmp/contents"
for f in ./usr/bin/gradwire ./usr/bin/gradwire-bench ./usr/bin/gradwire-train ./usr/bin/gradwire-check \
    ./usr/include/gradwire.h ./usr/lib/libgradwire.so.0 ./usr/lib/libgradwire.a \
    ./usr/lib/pkgconfig/gradwire.pc ./usr/lib/cmake/gradwire/gradwireConfig.cmake; do
    grep -qx "$f" "$tmp/contents" || fail "the package lacks $f"
done

# A scratch root with a dpkg database of its own. The maintainer scripts
# (ldconfig) run outside it: the root has no shell to chroot into.
root="$tmp/root"
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
touch "$root/var/lib/dpkg/status" "$root/var/lib/dpkg/available"
dpkg --root="$root" --log=/dev/null --force-depends --force-script-chrootless -i "$deb" \
    >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -i"; }
[ "$(dpkg-query --root="$root" -W -f='${db:Status-Status}' gradwire)" = installed ] ||
    fail "dpkg does not list gradwire as installed in the scratch root"
bin="$root/usr/bin"
# Each program's output is read whole before it is searched: with
# pipefail, `prog | grep -q` fails whenever grep has matched and gone
# before prog's last write (SIGPIPE), which a help text of several writes
# to stderr makes a race (CI-like runs saw "gradwire train does not start").
says() { # TEXT CMD...: CMD's output (stdout and stderr) contains TEXT
    local text="$1" out
    shift
    out=$(env -u LD_LIBRARY_PATH "$@" 2>&1 || true)
    grep -qF -- "$text" <<<"$out"
}
says "gradwire $want" "$bin/gradwire" version ||
    fail "installed gradwire version: $(env -u LD_LIBRARY_PATH "$bin/gradwire" version 2>&1)"
says "usage: gradwire-bench" "$bin/gradwire-bench" --help || fail "installed gradwire-bench does not start"
says "usage" "$bin/gradwire" train --help || fail "installed gradwire train does not start"
says "usage: gradwire check" "$bin/gradwire" check --help || fail "installed gradwire check does not start"

# The consumer, built against the installed package both ways.
export PKG_CONFIG_PATH="$root/usr/lib/pkgconfig"
libdir=$(realpath "$(pkg-config --variable=libdir gradwire)")
[ "$libdir" = "$(realpath "$root/usr/lib")" ] || fail "gradwire.pc's libdir $libdir is not the package's"
cc -std=c11 $san_flags "$src/tests/install/consumer.c" -o "$tmp/consumer_pc" \
    $(pkg-config --cflags --libs gradwire) -Wl,-rpath,"$libdir"
cmake -S "$src/tests/install" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$root/usr" \
    -DCMAKE_C_FLAGS="$san_flags" -DCMAKE_EXE_LINKER_FLAGS="$san_flags" >/dev/null
cmake --build "$tmp/cmake" >/dev/null
for exe in "$tmp/consumer_pc" "$tmp/cmake/consumer_cmake" "$tmp/cmake/consumer_static"; do
    env -u LD_LIBRARY_PATH "$bin/gradwire" launch -n 3 --timeout 60 -- "$exe" >"$tmp/out" 2>&1 ||
        { cat "$tmp/out"; fail "$exe under the installed launcher"; }
    grep -q "sum 6" "$tmp/out" || { cat "$tmp/out"; fail "$exe printed no sum"; }
done

# The Python package, when the build has it (python3-dev), imported from
# the package's dist-packages and run on 2 ranks (with numpy).
pydir="$root/usr/lib/python3/dist-packages"
if [ -f "$build/python/gradwire/__init__.py" ]; then
    grep -qx ./usr/lib/python3/dist-packages/gradwire/__init__.py "$tmp/contents" &&
        grep -q '^\./usr/lib/python3/dist-packages/gradwire/_core\..*\.so$' "$tmp/contents" ||
        fail "the package lacks the Python package (gradwire/__init__.py, gradwire/_core)"
    if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
        cat >"$tmp/job.py" <<'PY'
import numpy as np, gradwire
with gradwire.Comm() as comm:
    x = np.full(8, comm.rank + 1.0)
    comm.allreduce(x)
    print("python sum %g from %s" % (x[0], gradwire.__file__))
PY
        py_env=(env -u LD_LIBRARY_PATH PYTHONPATH="$pydir")
        if [ -n "$san_flags" ]; then # an instrumented extension in a plain interpreter
            py_env+=(LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
                ASAN_OPTIONS=detect_leaks=0)
        fi
        (cd "$tmp" && "${py_env[@]}" "$bin/gradwire" launch -n 2 --timeout 60 -- \
            /usr/bin/python3 "$tmp/job.py") >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "the installed Python package"; }
        [ "$(grep -c "python sum 3 from $pydir/gradwire/__init__.py" "$tmp/out")" -eq 2 ] ||
            { cat "$tmp/out"; fail "the installed Python package printed no sum"; }
        echo "deb test: the installed Python package ran on 2 ranks"
    else
        echo "deb test: numpy is not installed for /usr/bin/python3: the Python package is not run"
    fi
fi

dpkg --root="$root" --log=/dev/null --force-script-chrootless -r gradwire >"$tmp/dpkg.log" 2>&1 ||
    { cat "$tmp/dpkg.log"; fail "dpkg -r"; }
[ ! -e "$bin/gradwire" ] && [ ! -e "$root/usr/lib/libgradwire.so.0" ] ||
    fail "dpkg -r left the package's files behind"
echo "deb test: $(basename "$deb") built, installed, run (tools and 3 consumers) and removed"
