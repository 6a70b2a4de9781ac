#!/bin/sh
# Doxygen input filter for include/gradwire.h (docs/conf.py runs doxygen).
# The header documents every declaration with an ordinary C comment just
# above it; doxygen only reads comments that open with "/**". This turns a
# comment that opens a line with text ("/* Send count ...") into a doxygen
# comment, and leaves alone the file's banner ("/*" alone on its line),
# section rules ("/* ===") and comments that trail code on the same line.
exec sed -e 's#^\([[:space:]]*\)/\* \([^=-]\)#\1/** \2#' "$1"
