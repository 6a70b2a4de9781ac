# Sphinx configuration of gradwire's documentation (built by scripts/docs.sh).
#
# Pages are Markdown (myst-parser); the C API reference comes from
# include/gradwire.h through doxygen's XML and breathe. Everything here is a
# Debian 12 package (scripts/install-deps.sh test), so the site builds offline.
import logging
import os
import subprocess

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)

project = "gradwire"
author = "The gradwire authors"
copyright = "The gradwire authors"


def _version():
    """The library's version, read from the public header, so the docs never
    disagree with the code about it."""
    parts = {}
    with open(os.path.join(root, "include", "gradwire.h")) as f:
        for line in f:
            for key in ("MAJOR", "MINOR", "PATCH"):
                tag = "#define GW_VERSION_" + key + " "
                if line.startswith(tag):
                    parts[key] = line[len(tag):].strip()
    return "%s.%s.%s" % (parts["MAJOR"], parts["MINOR"], parts["PATCH"])


version = release = _version()

extensions = ["myst_parser", "breathe"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]
nitpicky = True

# The C API: doxygen writes XML of the one public header into the build
# directory at every build (GW_DOXYGEN_XML names it; scripts/docs.sh sets it).
doxygen_xml = os.environ.get("GW_DOXYGEN_XML", os.path.join(root, "build", "docs", "doxygen", "xml"))
breathe_projects = {"gradwire": doxygen_xml}
breathe_default_project = "gradwire"
breathe_domain_by_extension = {"h": "c"}
primary_domain = "c"
# gradwire.h names standard C types that no page of this site defines.
nitpick_ignore = [("c:identifier", t) for t in (
    "size_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "int8_t", "int16_t",
    "int32_t", "int64_t", "uintptr_t", "ssize_t", "FILE", "bool")]
# The opaque handles are declared but never defined in the header (that is
# what makes them opaque), so there is no definition to link to.
nitpick_ignore += [("c:identifier", t) for t in ("gw_comm", "gw_handle", "gw_compress_state")]
# Doxygen's text names the header itself, a file page that `doxygenfile`
# does not make: the reference is this page.
nitpick_ignore += [("std:ref", "gradwire_8h")]


def _run_doxygen():
    """Run doxygen on include/gradwire.h when the XML is missing or older
    than the header. The header's comments are plain C comments; the input
    filter (docs/doxygen-filter.sh) turns the ones that open a line into
    doxygen comments, so every function's text appears in the reference."""
    header = os.path.join(root, "include", "gradwire.h")
    index = os.path.join(doxygen_xml, "index.xml")
    if os.path.exists(index) and os.path.getmtime(index) >= os.path.getmtime(header):
        return
    out = os.path.dirname(doxygen_xml)
    os.makedirs(out, exist_ok=True)
    config = "\n".join([
        "PROJECT_NAME = gradwire",
        "INPUT = " + header,
        "OUTPUT_DIRECTORY = " + out,
        "XML_OUTPUT = " + os.path.basename(doxygen_xml),
        "GENERATE_XML = YES",
        "GENERATE_HTML = NO",
        "GENERATE_LATEX = NO",
        "OPTIMIZE_OUTPUT_FOR_C = YES",
        "JAVADOC_AUTOBRIEF = YES",
        "EXTRACT_ALL = YES",
        "ENABLE_PREPROCESSING = YES",
        "MACRO_EXPANSION = YES",
        "EXPAND_ONLY_PREDEF = YES",
        "PREDEFINED = GW_API= __attribute__(x)=",
        "INPUT_FILTER = " + os.path.join(here, "doxygen-filter.sh"),
        "QUIET = YES",
        "WARNINGS = NO",
    ])
    subprocess.run(["doxygen", "-"], input=config.encode(), check=True, cwd=out)


_run_doxygen()

html_theme = "furo"
html_title = "gradwire " + release
html_static_path = []

# Man pages, built from the same sources: `sphinx-build -b man`.
man_pages = [
    ("reference/commands/gradwire", "gradwire", "run, train, check and inspect gradwire jobs",
     [author], 1),
    ("reference/commands/gradwire-bench", "gradwire-bench",
     "benchmark gradwire's collectives, messages, tuning and codecs", [author], 1),
    ("reference/commands/gradwire-check", "gradwire-check",
     "acceptance test of a cluster's hosts and links", [author], 1),
    ("reference/commands/gradwire-train", "gradwire-train",
     "data-parallel SGD trainer on gradwire", [author], 1),
    ("reference/environment", "gradwire", "environment variables gradwire reads", [author], 7),
]
man_show_urls = False


class _SameNameStructAndFunction(logging.Filter):
    """gradwire.h names a struct and the function that fills it alike
    (`struct gw_cuda_info`, `gw_cuda_info()`), as C allows; Sphinx's C
    domain keeps one namespace for both and calls the second a duplicate.
    Only that warning, for those names, is dropped."""

    names = ("gw_cuda_info",)

    def filter(self, record):
        msg = record.getMessage()
        return not (msg.startswith("Duplicate C declaration") and
                    any(n in msg for n in self.names))


def setup(app):
    logging.getLogger("sphinx.sphinx.domains.c").addFilter(_SameNameStructAndFunction())
