/*
 * bench_plot.c - `--plot FILE`: a sweep's busbw curve as a PNG, drawn by
 * gnuplot the way scripts/render_results.py draws the pages of
 * docs/results (pngcairo, busbw in GB/s against the size on a log2 axis,
 * one line per curve), so that a quick run looks like the published
 * figures. The points go to gnuplot inline on its standard input: no
 * temporary files to clean up. gnuplot is a tool, not a library: when it
 * is missing the option is refused on the command line, before any rank
 * joins the job.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

int gw_bench_plot_available(void) { return system("command -v gnuplot >/dev/null 2>&1") == 0; }

/* s with the characters that would end a gnuplot string, or start one of
 * its enhanced-text markups, left out. */
static void plain(char *out, size_t cap, const char *s)
{
    size_t k = 0;
    for (; *s && k + 1 < cap; s++)
        if (!strchr("'\"\\_^{}@&~", *s))
            out[k++] = *s;
    out[k] = '\0';
}

int gw_bench_plot_busbw(const char *path, const char *title, const gw_bench_curve_t *curves,
                        int ncurves)
{
    char t[256], label[128];
    if (strchr(path, '\'') || strchr(path, '\n')) {
        fprintf(stderr,
                "gradwire-bench: --plot %s: a file name with a quote or a newline cannot "
                "be given to gnuplot\n",
                path);
        return -1;
    }
    FILE *g = popen("gnuplot", "w");
    if (!g) {
        fprintf(stderr, "gradwire-bench: --plot %s: cannot start gnuplot: %m\n", path);
        return -1;
    }
    plain(t, sizeof(t), title);
    fprintf(g,
            "set terminal pngcairo size 900,560 font ',10' noenhanced\nset output '%s'\n"
            "set title '%s'\nset logscale x 2\nset format x '%%.0b%%BB'\n"
            "set xlabel 'size (bytes)'\nset ylabel 'busbw (GB/s)'\nset key top left\n"
            "set grid\nplot ",
            path, t);
    int drawn = 0;
    for (int c = 0; c < ncurves; c++) {
        if (curves[c].n == 0)
            continue;
        plain(label, sizeof(label), curves[c].label);
        fprintf(g, "%s'-' using 1:2 with linespoints title '%s'", drawn++ ? ", " : "", label);
    }
    if (!drawn)
        fprintf(g, "NaN notitle");
    fputc('\n', g);
    for (int c = 0; c < ncurves; c++) {
        if (curves[c].n == 0)
            continue;
        for (size_t i = 0; i < curves[c].n; i++)
            fprintf(g, "%zu %.9g\n", curves[c].sizes[i], curves[c].busbw[i]);
        fprintf(g, "e\n");
    }
    int st = pclose(g);
    if (st != 0) {
        fprintf(stderr, "gradwire-bench: --plot %s: gnuplot failed (status %d)\n", path, st);
        return -1;
    }
    return 0;
}
