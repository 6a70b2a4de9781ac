#!/usr/bin/env bash
# docs.sh - build and check the documentation, as CI does (ctest: docs_build).
#
#   scripts/docs.sh [OUT_DIR]      (default: build/docs)
#
# GW_SPHINX_BUILD names another sphinx-build (default /usr/bin/sphinx-build,
# Debian's, for /usr/bin/python3).
#
# 1. README.md has at most 200 lines, and every relative link in it names a
#    file or folder of the repository.
# 2. Neither README.md nor docs/ holds a commit hash or a load reading typed
#    by hand (figures belong to the generated pages under docs/results/).
# 3. The Sphinx site (docs/, Markdown through myst-parser, the C API through
#    doxygen and breathe) builds as HTML and as man pages with every warning
#    an error, nitpicky: a page missing from the toctree, a link to a page
#    or anchor that does not exist, a C name the API reference does not
#    define, all fail.
# 4. Internal links are checked once more, builder-independently, with the
#    dummy builder (no network: `linkcheck` is never run).
#
# Exit 0 all good, 1 something failed (each failure says what and where),
# 77 when Sphinx, myst-parser, breathe, doxygen or the theme is missing
# (Debian packages in `scripts/install-deps.sh test`).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=${1:-$root/build/docs}
mkdir -p "$out"
out=$(cd "$out" && pwd)
PY=/usr/bin/python3
SPHINX=${GW_SPHINX_BUILD:-/usr/bin/sphinx-build}

missing=()
[ -x "$SPHINX" ] || missing+=(python3-sphinx)
for mod in myst_parser:python3-myst-parser breathe:python3-breathe furo:furo; do
    $PY -c "import ${mod%%:*}" 2>/dev/null || missing+=("${mod#*:}")
done
command -v doxygen >/dev/null || missing+=(doxygen)
if [ ${#missing[@]} -gt 0 ]; then
    echo "skipped: the documentation tools are missing: ${missing[*]} (scripts/install-deps.sh test)"
    exit 77
fi

failed=0
fail() {
    echo "FAIL: $*"
    failed=1
}

# Pages generated from the code by other scripts: their absence is named
# here, before Sphinx reports it as a missing toctree entry.
for page in reference/environment.md reference/errors.md; do
    [ -f "$root/docs/$page" ] ||
        fail "docs/$page is missing: it is generated from the code's registry (environment) and GW_STATUS_MAP (errors); run its generator"
done

# 1 and 2: the README's length and links, and no typed-in run records.
$PY - "$root" <<'EOF' || failed=1
import os, re, sys
root = sys.argv[1]
bad = 0
readme = os.path.join(root, "README.md")
lines = open(readme, encoding="utf-8").read().split("\n")
if lines and lines[-1] == "":
    lines.pop()
if len(lines) > 200:
    print("FAIL: README.md has %d lines; at most 200 (move the rest into docs/)" % len(lines))
    bad = 1
# Relative links [text](path) and <img src="path">, outside code blocks.
fence = False
for n, line in enumerate(lines, 1):
    if line.startswith("```"):
        fence = not fence
    if fence:
        continue
    for target in re.findall(r"\]\(([^)\s]+)\)", line):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#")[0]
        if not os.path.exists(os.path.join(root, path)):
            print("FAIL: README.md:%d links to %s, which does not exist" % (n, path))
            bad = 1
# A commit hash (7 to 40 hex digits with letters and digits in prose) or a
# load reading: these are run records, which live in generated pages only.
hexword = re.compile(r"(?<![\w/.#-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w/])")
loadword = re.compile(r"\bload (average )?(of )?\d|\bload average\b.*\d\.\d")
files = [readme]
for d, _, names in os.walk(os.path.join(root, "docs")):
    if os.path.relpath(d, os.path.join(root, "docs")).split(os.sep)[0] in ("results", "_build"):
        continue
    files += [os.path.join(d, f) for f in names if f.endswith(".md")]
for path in sorted(files):
    fence = False
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        if line.startswith("```"):
            fence = not fence
        if fence:
            continue
        for rx, what in ((hexword, "a commit hash"), (loadword, "a load reading")):
            m = rx.search(line)
            if m:
                print("FAIL: %s:%d has %s (%r): figures and run records belong to the "
                      "generated pages (scripts/results.sh)" % (os.path.relpath(path, root), n, what, m.group(0)))
                bad = 1
sys.exit(bad)
EOF

# 3: the site and the man pages, warnings as errors.
export GW_DOXYGEN_XML="$out/doxygen/xml"
for builder in html man; do
    if ! "$SPHINX" -W --keep-going -n -q -b "$builder" -d "$out/doctrees" "$root/docs" "$out/$builder" \
        >"$out/$builder.log" 2>&1; then
        fail "sphinx-build -b $builder (warnings are errors):"
        sed -n '1,60p' "$out/$builder.log"
    fi
done
# The five man pages, each built.
for page in gradwire.1 gradwire-bench.1 gradwire-check.1 gradwire-train.1 gradwire.7; do
    [ -s "$out/man/$page" ] || fail "man page $page was not built"
done

# 4: internal references once more, without the HTML writer.
if ! "$SPHINX" -W --keep-going -n -q -b dummy -d "$out/doctrees" "$root/docs" "$out/dummy" \
    >"$out/dummy.log" 2>&1; then
    fail "internal links (sphinx-build -b dummy -n):"
    sed -n '1,60p' "$out/dummy.log"
fi

if [ $failed -eq 0 ]; then
    echo "PASS: docs built (html: $out/html/index.html, man: $out/man), README within 200 lines, links resolve"
fi
exit $failed
