/* The PNG line plot of `ampc bench --compare --plot` (plot.h): an RGB canvas, lines drawn
 * with Bresenham's algorithm, text in a 3x5 pixel font, and a PNG of stored deflate blocks
 * (zlib without compression: the file is a few hundred KiB, and nothing is linked). */
#include "tools/plot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

enum { W = 800, H = 400, LEFT = 60, RIGHT = 20, TOP = 40, BOTTOM = 30, SCALE = 2 };

typedef struct Canvas {
    uint8_t px[H][W][3];
} Canvas;

static void put(Canvas *c, int x, int y, const uint8_t rgb[3]) {
    if (x >= 0 && x < W && y >= 0 && y < H) memcpy(c->px[y][x], rgb, 3);
}

static void line(Canvas *c, int x0, int y0, int x1, int y1, const uint8_t rgb[3]) {
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, err = dx + dy;
    for (;;) {
        put(c, x0, y0, rgb), put(c, x0, y0 + 1, rgb); /* two pixels thick */
        if (x0 == x1 && y0 == y1) return;
        int e2 = 2 * err;
        if (e2 >= dy) err += dy, x0 += sx;
        if (e2 <= dx) err += dx, y0 += sy;
    }
}

/* 3x5 glyphs, one row of 3 bits per byte, top row first. */
static const struct {
    char ch;
    uint8_t rows[5];
} FONT[] = {
    {'0', {7, 5, 5, 5, 7}}, {'1', {2, 6, 2, 2, 7}}, {'2', {7, 1, 7, 4, 7}}, {'3', {7, 1, 7, 1, 7}},
    {'4', {5, 5, 7, 1, 1}}, {'5', {7, 4, 7, 1, 7}}, {'6', {7, 4, 7, 5, 7}}, {'7', {7, 1, 1, 1, 1}},
    {'8', {7, 5, 7, 5, 7}}, {'9', {7, 5, 7, 1, 7}}, {'.', {0, 0, 0, 0, 2}}, {'-', {0, 0, 7, 0, 0}},
    {'(', {1, 2, 2, 2, 1}}, {')', {4, 2, 2, 2, 4}}, {'A', {2, 5, 7, 5, 5}}, {'B', {6, 5, 6, 5, 6}},
    {'C', {7, 4, 4, 4, 7}}, {'D', {6, 5, 5, 5, 6}}, {'E', {7, 4, 6, 4, 7}}, {'F', {7, 4, 6, 4, 4}},
    {'G', {7, 4, 5, 5, 7}}, {'H', {5, 5, 7, 5, 5}}, {'I', {7, 2, 2, 2, 7}}, {'K', {5, 5, 6, 5, 5}},
    {'L', {4, 4, 4, 4, 7}}, {'M', {5, 7, 7, 5, 5}}, {'N', {6, 5, 5, 5, 5}}, {'O', {7, 5, 5, 5, 7}},
    {'P', {7, 5, 7, 4, 4}}, {'R', {6, 5, 6, 5, 5}}, {'S', {7, 4, 7, 1, 7}}, {'T', {7, 2, 2, 2, 2}},
    {'U', {5, 5, 5, 5, 7}}, {'X', {5, 5, 2, 5, 5}}, {'Y', {5, 5, 2, 2, 2}}, {'/', {1, 1, 2, 4, 4}},
};

static void text(Canvas *c, int x, int y, const char *s, const uint8_t rgb[3]) {
    for (; *s; s++, x += 4 * SCALE) {
        char ch = *s >= 'a' && *s <= 'z' ? (char)(*s - 'a' + 'A') : *s;
        for (size_t g = 0; g < sizeof FONT / sizeof *FONT; g++) {
            if (FONT[g].ch != ch) continue;
            for (int r = 0; r < 5; r++)
                for (int b = 0; b < 3; b++)
                    if (FONT[g].rows[r] >> (2 - b) & 1)
                        for (int k = 0; k < SCALE * SCALE; k++) put(c, x + b * SCALE + k % SCALE, y + r * SCALE + k / SCALE, rgb);
        }
    }
}

static void draw(Canvas *c, const PlotSeries *s, size_t n_series, const char *unit) {
    static const uint8_t white[3] = {255, 255, 255}, axis[3] = {60, 60, 60}, grid[3] = {225, 225, 225};
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) memcpy(c->px[y][x], white, 3);
    double top = 0;
    size_t most = 1;
    for (size_t k = 0; k < n_series; k++) {
        for (size_t i = 0; i < s[k].n; i++)
            if (s[k].y[i] > top) top = s[k].y[i];
        if (s[k].n > most) most = s[k].n;
    }
    if (!(top > 0)) top = 1;
    int x0 = LEFT, x1 = W - RIGHT, y0 = H - BOTTOM, y1 = TOP;
    for (int q = 1; q <= 4; q++) line(c, x0, y0 - (y0 - y1) * q / 4, x1, y0 - (y0 - y1) * q / 4, grid);
    line(c, x0, y0, x1, y0, axis), line(c, x0, y0, x0, y1, axis);
    char label[64];
    snprintf(label, sizeof label, "%.3g %s", top, unit);
    text(c, 4, y1 - 12, label, axis);
    text(c, 4, y0 - 8, "0", axis);
    snprintf(label, sizeof label, "%zu", most);
    text(c, x1 - 4 * SCALE * (int)strlen(label), y0 + 10, label, axis);
    for (size_t k = 0; k < n_series; k++) {
        int px = 0, py = 0;
        for (size_t i = 0; i < s[k].n; i++) {
            int x = x0 + (most > 1 ? (int)((double)(x1 - x0) * (double)i / (double)(most - 1)) : 0);
            int y = y0 - (int)((double)(y0 - y1) * (s[k].y[i] > 0 ? s[k].y[i] : 0) / top);
            if (i) line(c, px, py, x, y, s[k].rgb);
            px = x, py = y;
        }
        int lx = x0 + 20 + (int)k * 200;
        for (int d = 0; d < 10; d++) line(c, lx, 10 + d, lx + 10, 10 + d, s[k].rgb);
        text(c, lx + 16, 10, s[k].label ? s[k].label : "", axis);
    }
}

/* ---- the PNG file ------------------------------------------------------------------- */

static uint32_t crc_table[256];

static uint32_t crc(uint32_t c, const uint8_t *p, size_t n) {
    if (!crc_table[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t v = i;
            for (int k = 0; k < 8; k++) v = v & 1 ? 0xEDB88320u ^ (v >> 1) : v >> 1;
            crc_table[i] = v;
        }
    c = ~c;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return ~c;
}

static void be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static bool chunk(FILE *f, const char *type, const uint8_t *data, uint32_t len) {
    uint8_t head[8], tail[4];
    be32(head, len);
    memcpy(head + 4, type, 4);
    be32(tail, crc(crc(0, head + 4, 4), data, len));
    return fwrite(head, 1, 8, f) == 8 && (!len || fwrite(data, 1, len, f) == len) && fwrite(tail, 1, 4, f) == 4;
}

/* The zlib stream of the filtered rows (filter 0 each), in stored deflate blocks. */
static uint8_t *zlib_stored(const Canvas *c, uint32_t *out_len) {
    const size_t row = 1 + W * 3, raw = (size_t)H * row, block = 65535;
    size_t n_blocks = (raw + block - 1) / block, len = 2 + raw + 5 * n_blocks + 4;
    uint8_t *z = malloc(len), *p = z;
    if (!z) return NULL;
    *p++ = 0x78, *p++ = 0x01; /* deflate, 32 KiB window, no dictionary, check bits */
    uint32_t a = 1, b = 0;    /* Adler-32 */
    size_t done = 0;
    for (size_t k = 0; k < n_blocks; k++) {
        size_t n = raw - done < block ? raw - done : block;
        *p++ = k + 1 == n_blocks; /* BFINAL, BTYPE 00 */
        *p++ = (uint8_t)n, *p++ = (uint8_t)(n >> 8), *p++ = (uint8_t)~n, *p++ = (uint8_t)(~n >> 8);
        for (size_t i = 0; i < n; i++, done++) {
            size_t y = done / row, x = done % row;
            uint8_t v = x == 0 ? 0 : c->px[y][(x - 1) / 3][(x - 1) % 3];
            *p++ = v;
            a = (a + v) % 65521, b = (b + a) % 65521;
        }
    }
    be32(p, b << 16 | a);
    *out_len = (uint32_t)len;
    return z;
}

typedef struct Png {
    const uint8_t *z;
    uint32_t zlen;
} Png;

static bool write_png(void *ctx, FILE *f) {
    const Png *png = ctx;
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    uint8_t ihdr[13];
    be32(ihdr, W), be32(ihdr + 4, H);
    ihdr[8] = 8, ihdr[9] = 2, ihdr[10] = ihdr[11] = ihdr[12] = 0; /* 8-bit RGB, no interlace */
    return fwrite(sig, 1, 8, f) == 8 && chunk(f, "IHDR", ihdr, 13) && chunk(f, "IDAT", png->z, png->zlen) &&
           chunk(f, "IEND", NULL, 0);
}

bool ampc_plot_png(const char *path, const PlotSeries *s, size_t n_series, const char *unit) {
    Canvas *c = malloc(sizeof *c);
    Png png = {NULL, 0};
    uint8_t *z = NULL;
    if (c) draw(c, s, n_series, unit), png.z = z = zlib_stored(c, &png.zlen);
    free(c);
    if (!z) {
        errno = ENOMEM;
        return false;
    }
    /* As every output of ampc: a temporary file renamed over `path` (ir/output.c). */
    errno = 0;
    AmpStatus st = {AMP_OK, ""};
    bool ok = amp_output_write(path, write_png, &png, &st) == AMP_OK;
    int err = errno;
    free(z);
    if (!ok) errno = err ? err : EIO;
    return ok;
}
