#!/usr/bin/env bash
# The Python package the PyPI way (python/pyproject.toml): an sdist made by
# setuptools' PEP 517 hook, a wheel built from that sdist with pip against
# this build's libgradwire (GRADWIRE_BUILD_DIR), installed into a fresh
# venv (/usr/bin/python3 -m venv --system-site-packages, for Debian's numpy
# and torch) and tests/python/api_test.py run on 2 ranks with the venv's
# interpreter, which must import gradwire from the venv.
# Usage: wheel_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src="$1"
build="$2"
py=/usr/bin/python3
[ -x "$py" ] || { echo "SKIP: $py is not installed"; exit 77; }
for mod in venv:python3-venv ensurepip:python3-venv setuptools:python3-setuptools \
    wheel:python3-wheel pip:python3-pip numpy:python3-numpy; do
    "$py" -c "import ${mod%%:*}" 2>/dev/null ||
        { echo "SKIP: $py lacks ${mod%%:*} (scripts/install-deps.sh test installs ${mod#*:})"; exit 77; }
done
[ -f "$build/libgradwire.so" ] || { echo "FAIL: $build holds no libgradwire.so"; exit 1; }
tmp="$(mktemp -d /tmp/gw-wheel-XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# A copy of the sources the package needs (the build writes into its tree).
mkdir -p "$tmp/src"
cp -r "$src/python" "$src/include" "$tmp/src/"
rm -rf "$tmp/src/python/build" "$tmp/src/python/"*.egg-info
(cd "$tmp/src/python" && "$py" -c 'from setuptools import build_meta as b; print(b.build_sdist("'"$tmp/dist"'"))') \
    >"$tmp/sdist.log" 2>&1 || { cat "$tmp/sdist.log"; fail "the sdist"; }
sdist=("$tmp"/dist/gradwire-*.tar.gz)
[ -f "${sdist[0]}" ] || fail "no sdist in $tmp/dist"
tar -tzf "${sdist[0]}" >"$tmp/sdist.files"
for f in pyproject.toml setup.py gradwire/__init__.py gradwire/torch.py src/core.h src/module.c; do
    grep -q "^gradwire-[0-9.]*/$f\$" "$tmp/sdist.files" || fail "the sdist lacks $f"
done
# The sdist unpacked beside include/, as python/ sits in the repository.
tar -xzf "${sdist[0]}" -C "$tmp/src"
unpacked=$(echo "$tmp"/src/gradwire-[0-9]*)
GRADWIRE_BUILD_DIR="$build" "$py" -m pip wheel --no-build-isolation --no-deps --no-index \
    -w "$tmp/wheels" "$unpacked" >"$tmp/wheel.log" 2>&1 || { cat "$tmp/wheel.log"; fail "pip wheel"; }
wheel=("$tmp"/wheels/gradwire-*.whl)
[ -f "${wheel[0]}" ] || fail "pip wheel made no wheel"

"$py" -m venv --system-site-packages "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --no-deps --no-index "${wheel[0]}" >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; fail "pip install of the wheel"; }
where=$(cd "$tmp" && env -u PYTHONPATH "$tmp/venv/bin/python" -c 'import gradwire; print(gradwire.__file__)')
[[ "$where" == "$tmp/venv/"* ]] || fail "the venv imports gradwire from $where, not from the venv"

GW_PY_STORE_DIR="$tmp/store" # api_test's Comm.from_store
mkdir -p "$GW_PY_STORE_DIR"
export GW_PY_STORE_DIR
status=0
(cd "$tmp" && env -u PYTHONPATH "$build/gradwire" launch -n 2 --timeout 240 -- \
    "$tmp/venv/bin/python" "$src/tests/python/api_test.py") >"$tmp/out" 2>&1 || status=$?
good=$(grep -c 'python api: [0-9]* passed, 0 failed' "$tmp/out" || true)
if [ "$status" -ne 0 ] || [ "$good" -ne 2 ]; then
    grep -v ' gradwire [a-z]* \(WARN\|INFO\) ' "$tmp/out" | tail -40
    fail "api_test.py from the wheel: exit $status, $good of 2 ranks passed"
fi
echo "wheel test: $(basename "${sdist[0]}") -> $(basename "${wheel[0]}"), api_test passed on 2 ranks from a venv"
