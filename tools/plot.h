/* A line plot of a few series written as a PNG file (tools/plot.c), for `ampc bench
 * --compare --plot FILE`: no image library, a stored (uncompressed) deflate stream. */
#ifndef AMPC_TOOLS_PLOT_H
#define AMPC_TOOLS_PLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct PlotSeries {
    const char *label;  /* drawn in the legend (digits, letters, ' ', '.', '-', '(', ')') */
    const double *y;    /* n values, y[i] drawn at x = i */
    size_t n;
    uint8_t rgb[3];
} PlotSeries;

/* Draws the series on shared axes from 0 to the largest value (the y axis labelled with
 * that value and `unit`), a legend, and writes the PNG as every output of ampc is written
 * (ir/output.c: a temporary file renamed over `path`). false with errno set when writing
 * failed. */
bool ampc_plot_png(const char *path, const PlotSeries *s, size_t n_series, const char *unit);

#endif
