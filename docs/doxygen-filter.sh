#!/bin/sh
# Doxygen input filter for include/gradwire.h (docs/conf.py runs doxygen).
# The header documents every declaration with an ordinary C comment just
# above it, and every struct field and enum value with one that trails it on
# its line; doxygen only reads comments that open with "/**" (above) or
# "/**<" (trailing). This turns a comment that opens a line with text
# ("/* Send count ...") into a doxygen comment, and one that trails code
# ("int rank; /* this process's rank */") into a member's comment; it
# leaves alone the file's banner ("/*" alone on its line), section rules
# ("/* ===") and the lines inside a comment.
exec sed -e 's#^\([[:space:]]*\)/\* \([^=-]\)#\1/** \2#' \
    -e '/^\(#endif\|[[:space:]]*\(\/\*\|\*\)\)/!s#\([^[:space:]]\)\([[:space:]][[:space:]]*\)/\* #\1\2/**< #' "$1"
