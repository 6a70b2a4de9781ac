# Sphinx configuration of the packages' manual pages (debian/rules:
# sphinx-build -b man -c debian/man docs/reference OUT). It reads only the
# reference pages the man pages come from, with myst-parser alone: no
# doxygen or breathe (the C API pages are not man pages), and no theme.
# The pages and titles are docs/conf.py's man_pages, read from there so
# that the two never disagree.
import ast
import os

here = os.path.dirname(os.path.abspath(__file__))
docs = os.path.join(os.path.dirname(os.path.dirname(here)), "docs")


def _docs_setting(name):
    """A literal assignment of docs/conf.py, without running that file
    (it needs breathe and doxygen)."""
    with open(os.path.join(docs, "conf.py")) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node.value
    raise KeyError(name)


def _version():
    parts = {}
    with open(os.path.join(os.path.dirname(docs), "include", "gradwire.h")) as f:
        for line in f:
            for key in ("MAJOR", "MINOR", "PATCH"):
                tag = "#define GW_VERSION_" + key + " "
                if line.startswith(tag):
                    parts[key] = line[len(tag):].strip()
    return "%s.%s.%s" % (parts["MAJOR"], parts["MINOR"], parts["PATCH"])


project = "gradwire"
author = "The gradwire authors"
copyright = "The gradwire authors"
version = release = _version()
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

# docs/conf.py's entries name pages under docs/; this source is docs/reference.
man_pages = []
for entry in _docs_setting("man_pages").elts:
    page, name, title, _authors, section = (ast.literal_eval(e) if not isinstance(e, ast.List)
                                            else None for e in entry.elts)
    man_pages.append((os.path.relpath(page, "reference"), name, title, [author], section))
root_doc = man_pages[0][0]
exclude_patterns = ["c-api.md", "transport-*.md", "errors.md", "index.md", "commands.md"]
man_show_urls = False
suppress_warnings = ["myst.xref_missing", "ref.doc", "ref.ref", "toc.not_readable", "toc.excluded",
                     "myst.header"]
