/*
 * Queries: the expression language of gpu-index.h, parsed into a tree of
 * AND / OR / NOT over attribute value sets, and evaluated two ways:
 *
 *   - on the compressed columns, with word-aligned AND / OR / NOT that
 *     never expand a bitmap to one bit per row (fills are handled as
 *     runs), giving row ids;
 *   - on one record, by comparing values: the brute-force reference that
 *     the tests and the benchmark check the first against.
 *
 * Result bitmaps are WAH with both fill kinds: a literal has bit 31 set; a
 * fill has bit 31 clear, bit 30 the fill bit and the count of 31-row
 * chunks in bits 0..29.  They always cover every chunk of the segment.
 */
#include <config.h>

#include "gpu_services/index/index-private.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- Query trees. ---- */

enum qn_type {
    QN_AND,
    QN_OR,
    QN_NOT,
    QN_SET,                     /* attr's value in one of the ranges. */
    QN_FLAGS,                   /* TCP with every flag of 'mask' set. */
};

struct qrange {
    uint32_t lo, hi;
};

struct qnode {
    enum qn_type type;
    struct qnode *a, *b;
    enum gpu_index_attr attr;
    struct qrange *ranges;
    size_t n_ranges;
    uint32_t mask;
};

struct gpu_index_query {
    struct qnode *root;
};

static void
qnode_free(struct qnode *n)
{
    if (n) {
        qnode_free(n->a);
        qnode_free(n->b);
        free(n->ranges);
        free(n);
    }
}

void
gpu_index_query_destroy(struct gpu_index_query *q)
{
    if (q) {
        qnode_free(q->root);
        free(q);
    }
}

static struct qnode *
qnode_new(enum qn_type type, struct qnode *a, struct qnode *b)
{
    struct qnode *n = calloc(1, sizeof *n);

    if (!n) {
        qnode_free(a);
        qnode_free(b);
        return NULL;
    }
    n->type = type;
    n->a = a;
    n->b = b;
    return n;
}

/* Joins 'b' to '*acc' with 'type' (AND or OR); '*acc' may be NULL. */
static bool
qnode_join(struct qnode **acc, enum qn_type type, struct qnode *b)
{
    if (!b) {
        return false;
    }
    if (!*acc) {
        *acc = b;
        return true;
    }
    *acc = qnode_new(type, *acc, b);
    return *acc != NULL;
}

static struct qnode *
qnode_set(enum gpu_index_attr attr, uint32_t lo, uint32_t hi)
{
    struct qnode *n = qnode_new(QN_SET, NULL, NULL);

    if (n) {
        n->attr = attr;
        n->ranges = malloc(sizeof *n->ranges);
        if (!n->ranges) {
            free(n);
            return NULL;
        }
        n->ranges[0].lo = lo;
        n->ranges[0].hi = hi;
        n->n_ranges = 1;
    }
    return n;
}

/* ---- Brute-force evaluation on one record. ---- */

static bool
match_node(const struct qnode *n, const struct gpu_index_record *r)
{
    uint32_t v;
    size_t i;

    switch (n->type) {
    case QN_AND:
        return match_node(n->a, r) && match_node(n->b, r);
    case QN_OR:
        return match_node(n->a, r) || match_node(n->b, r);
    case QN_NOT:
        return !match_node(n->a, r);
    case QN_SET:
        v = gpu_index_attr_value(r, n->attr);
        for (i = 0; i < n->n_ranges; i++) {
            if (v >= n->ranges[i].lo && v <= n->ranges[i].hi) {
                return true;
            }
        }
        return false;
    case QN_FLAGS:
        v = gpu_index_attr_value(r, GPU_INDEX_ATTR_TCP_FLAGS);
        return v < 256 && (v & n->mask) == n->mask;
    }
    return false;
}

bool
gpu_index_query_match(const struct gpu_index_query *q,
                      const struct gpu_index_record *r)
{
    return match_node(q->root, r);
}

/* ---- Word-aligned bitmap operations. ---- */

struct rbm {
    uint32_t *w;
    size_t n, cap;
};

/* Reads a column (index encoding) or a result bitmap as runs: a fill of
 * 'run' chunks of 'bit', or one literal.  Past its last word a bitmap is
 * zeros. */
struct run_iter {
    const uint32_t *w, *end;
    bool plwah;
    uint64_t run;
    bool bit;
    bool lit;
    uint32_t val;
    uint32_t pend;              /* PLWAH: the folded literal, next. */
};

static void
it_init(struct run_iter *it, const uint32_t *w, size_t n, bool plwah)
{
    memset(it, 0, sizeof *it);
    it->w = w;
    /* An empty bitmap (an absent column, the missing second operand of
     * an odd OR) has no words at all: NULL + 0 is undefined in C, which
     * clang's UBSan reports. */
    it->end = w ? w + n : w;
    it->plwah = plwah;
}

static void
it_load(struct run_iter *it)
{
    while (!it->lit && !it->run) {
        uint32_t x;

        if (it->pend) {
            it->lit = true;
            it->val = it->pend;
            it->pend = 0;
            return;
        }
        if (it->w >= it->end) {
            it->run = UINT64_MAX;
            it->bit = false;
            return;
        }
        x = *it->w++;
        if (x & IX_LIT) {
            it->lit = true;
            it->val = x & IX_PAYLOAD;
        } else if (it->plwah) {
            uint32_t pos = (x >> IX_PL_SHIFT) & 31;

            it->run = x & IX_PL_COUNT;
            it->bit = false;
            it->pend = pos ? 1u << (pos - 1) : 0;
        } else {
            it->run = x & IX_WAH_COUNT;
            it->bit = (x & IX_FILL1) != 0;
        }
    }
}

/* Takes one chunk's bits off 'it'. */
static uint32_t
it_take1(struct run_iter *it)
{
    if (it->lit) {
        it->lit = false;
        return it->val;
    }
    it->run--;
    return it->bit ? IX_PAYLOAD : 0;
}

static int
rbm_push(struct rbm *b, uint32_t w)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 16;
        uint32_t *nw = realloc(b->w, cap * sizeof *nw);

        if (!nw) {
            return GPU_ERR_NOMEM;
        }
        b->w = nw;
        b->cap = cap;
    }
    b->w[b->n++] = w;
    return GPU_OK;
}

static int
rbm_fill(struct rbm *b, bool bit, uint64_t n)
{
    while (n) {
        uint32_t *last = b->n ? &b->w[b->n - 1] : NULL;

        if (last && !(*last & IX_LIT) && !!(*last & IX_FILL1) == bit
            && (*last & IX_WAH_COUNT) < IX_WAH_COUNT) {
            uint64_t room = IX_WAH_COUNT - (*last & IX_WAH_COUNT);
            uint64_t k = n < room ? n : room;

            *last += k;
            n -= k;
        } else {
            uint64_t k = n < IX_WAH_COUNT ? n : IX_WAH_COUNT;

            if (rbm_push(b, (bit ? IX_FILL1 : 0) | (uint32_t) k)) {
                return GPU_ERR_NOMEM;
            }
            n -= k;
        }
    }
    return GPU_OK;
}

static int
rbm_lit(struct rbm *b, uint32_t v)
{
    if (v == 0 || v == IX_PAYLOAD) {
        return rbm_fill(b, v != 0, 1);
    }
    return rbm_push(b, IX_LIT | v);
}

enum bop { OP_AND, OP_OR };

static uint32_t
bop(enum bop op, uint32_t a, uint32_t b)
{
    return op == OP_AND ? a & b : a | b;
}

/* out = a op b over 'n_chunks' chunks. */
static int
rbm_op(struct rbm *out, struct run_iter *a, struct run_iter *b,
       enum bop op, uint64_t n_chunks)
{
    uint64_t left = n_chunks;
    int error = GPU_OK;

    out->n = 0;
    while (left && !error) {
        it_load(a);
        it_load(b);
        if (!a->lit && !b->lit) {
            uint64_t k = a->run < b->run ? a->run : b->run;

            k = k < left ? k : left;
            error = rbm_fill(out, bop(op, a->bit, b->bit), k);
            a->run -= k;
            b->run -= k;
            left -= k;
        } else {
            uint32_t va = it_take1(a), vb = it_take1(b);

            error = rbm_lit(out, bop(op, va, vb));
            left--;
        }
    }
    return error;
}

/* out = NOT a, clearing the bits past the last row. */
static int
rbm_not(struct rbm *out, struct run_iter *a, uint64_t n_chunks,
        uint32_t n_rows)
{
    uint32_t last = n_rows % 31 ? (1u << (n_rows % 31)) - 1 : IX_PAYLOAD;
    uint64_t left = n_chunks;
    int error = GPU_OK;

    out->n = 0;
    while (left && !error) {
        it_load(a);
        if (!a->lit) {
            uint64_t k = a->run < left ? a->run : left;
            bool bit = !a->bit;

            a->run -= k;
            left -= k;
            if (bit && !left && last != IX_PAYLOAD) {
                error = rbm_fill(out, true, k - 1);
                error = error ? error : rbm_lit(out, last);
            } else {
                error = rbm_fill(out, bit, k);
            }
        } else {
            uint32_t v = ~it_take1(a) & IX_PAYLOAD;

            left--;
            error = rbm_lit(out, left ? v : v & last);
        }
    }
    return error;
}

struct eval_ctx {
    const struct gpu_index_segment_index *seg;
    uint64_t n_chunks;
};

static void
col_iter(const struct eval_ctx *c, enum gpu_index_attr attr, uint32_t col,
         struct run_iter *it)
{
    const struct gpu_index_bitmaps *bm = &c->seg->attrs[attr];

    it_init(it, bm->words + bm->offsets[col],
            bm->offsets[col + 1] - bm->offsets[col],
            bm->encoding == GPU_INDEX_PLWAH);
}

/* ORs the columns 'cols[0 .. n)' of 'attr' into 'out', pairwise so that
 * each word is merged about log2(n) times. */
static int
or_columns(const struct eval_ctx *c, enum gpu_index_attr attr,
           const uint32_t *cols, size_t n, struct rbm *out)
{
    struct rbm *level;
    size_t m, i;
    int error = GPU_OK;

    out->n = 0;
    if (n == 0) {
        return rbm_fill(out, false, c->n_chunks);
    }
    m = (n + 1) / 2;
    level = calloc(m, sizeof *level);
    if (!level) {
        return GPU_ERR_NOMEM;
    }
    for (i = 0; i < m && !error; i++) {
        struct run_iter a, b;

        col_iter(c, attr, cols[2 * i], &a);
        if (2 * i + 1 < n) {
            col_iter(c, attr, cols[2 * i + 1], &b);
        } else {
            it_init(&b, NULL, 0, false);
        }
        error = rbm_op(&level[i], &a, &b, OP_OR, c->n_chunks);
    }
    while (m > 1 && !error) {
        size_t k = 0;

        for (i = 0; i < m; i += 2) {
            struct rbm r = { NULL, 0, 0 };

            if (i + 1 < m) {
                struct run_iter a, b;

                it_init(&a, level[i].w, level[i].n, false);
                it_init(&b, level[i + 1].w, level[i + 1].n, false);
                if (!error) {
                    error = rbm_op(&r, &a, &b, OP_OR, c->n_chunks);
                }
                free(level[i].w);
                free(level[i + 1].w);
                level[i + 1].w = NULL;
            } else {
                r = level[i];
            }
            level[i].w = NULL;
            level[k++] = r;
        }
        m = k;
    }
    if (!error) {
        free(out->w);
        *out = level[0];
        level[0].w = NULL;
    }
    for (i = 0; i < (n + 1) / 2; i++) {
        free(level[i].w);
    }
    free(level);
    return error;
}

static int
eval_node(const struct eval_ctx *c, const struct qnode *n, struct rbm *out)
{
    const struct gpu_index_bitmaps *bm;
    struct rbm x = { NULL, 0, 0 }, y = { NULL, 0, 0 };
    struct run_iter a, b;
    uint32_t *cols = NULL;
    size_t n_cols = 0, i;
    int error;

    switch (n->type) {
    case QN_AND:
    case QN_OR:
        error = eval_node(c, n->a, &x);
        error = error ? error : eval_node(c, n->b, &y);
        if (!error) {
            it_init(&a, x.w, x.n, false);
            it_init(&b, y.w, y.n, false);
            error = rbm_op(out, &a, &b, n->type == QN_AND ? OP_AND : OP_OR,
                           c->n_chunks);
        }
        break;
    case QN_NOT:
        error = eval_node(c, n->a, &x);
        if (!error) {
            it_init(&a, x.w, x.n, false);
            error = rbm_not(out, &a, c->n_chunks, c->seg->n_rows);
        }
        break;
    case QN_SET:
    case QN_FLAGS:
        bm = &c->seg->attrs[n->type == QN_SET ? n->attr
                                              : GPU_INDEX_ATTR_TCP_FLAGS];
        cols = malloc((bm->n_keys ? bm->n_keys : 1) * sizeof *cols);
        if (!cols) {
            return GPU_ERR_NOMEM;
        }
        if (n->type == QN_FLAGS) {
            for (i = 0; i < bm->n_keys; i++) {
                if (bm->keys[i] < 256 && (bm->keys[i] & n->mask) == n->mask) {
                    cols[n_cols++] = i;
                }
            }
        } else {
            /* Ranges may overlap: mark, then collect in key order. */
            uint8_t *hit = calloc(bm->n_keys ? bm->n_keys : 1, 1);

            if (!hit) {
                free(cols);
                return GPU_ERR_NOMEM;
            }
            for (i = 0; i < n->n_ranges; i++) {
                uint32_t lo = 0, hi = bm->n_keys;

                while (lo < hi) {
                    uint32_t mid = lo + (hi - lo) / 2;

                    if (bm->keys[mid] < n->ranges[i].lo) {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                for (; lo < bm->n_keys && bm->keys[lo] <= n->ranges[i].hi;
                     lo++) {
                    hit[lo] = 1;
                }
            }
            for (i = 0; i < bm->n_keys; i++) {
                if (hit[i]) {
                    cols[n_cols++] = i;
                }
            }
            free(hit);
        }
        error = or_columns(c, (enum gpu_index_attr) (bm - c->seg->attrs),
                           cols, n_cols, out);
        free(cols);
        break;
    default:
        error = GPU_ERR_INVALID;
    }
    free(x.w);
    free(y.w);
    return error;
}

int
gpu_index_query_eval(const struct gpu_index_query *q,
                     const struct gpu_index_segment_index *seg,
                     uint32_t **rowsp, size_t *np)
{
    struct eval_ctx c = { seg, (seg->n_rows + 30ull) / 31 };
    struct rbm r = { NULL, 0, 0 };
    uint32_t *rows = NULL;
    size_t n = 0, cap = 0, i;
    uint64_t chunk = 0;
    int error;

    *rowsp = NULL;
    *np = 0;
    error = eval_node(&c, q->root, &r);
    if (error) {
        free(r.w);
        return error;
    }
    /* Two passes: count, then fill. */
    for (int pass = 0; pass < 2; pass++) {
        chunk = 0;
        n = 0;
        for (i = 0; i < r.n; i++) {
            uint32_t x = r.w[i];

            if (x & IX_LIT) {
                uint32_t p = x & IX_PAYLOAD;

                while (p) {
                    if (rows) {
                        rows[n] = chunk * 31 + ix_ctz(p);
                    }
                    n++;
                    p &= p - 1;
                }
                chunk++;
            } else {
                uint64_t k = x & IX_WAH_COUNT, row, end;

                if (x & IX_FILL1) {
                    end = (chunk + k) * 31;
                    end = end < seg->n_rows ? end : seg->n_rows;
                    for (row = chunk * 31; row < end; row++) {
                        if (rows) {
                            rows[n] = row;
                        }
                        n++;
                    }
                }
                chunk += k;
            }
        }
        if (!pass) {
            cap = n;
            rows = malloc((cap ? cap : 1) * sizeof *rows);
            if (!rows) {
                free(r.w);
                return GPU_ERR_NOMEM;
            }
        }
    }
    free(r.w);
    *rowsp = rows;
    *np = n;
    return GPU_OK;
}

/* ---- Parsing. ---- */

enum tok {
    T_END, T_LP, T_RP, T_AND, T_OR, T_NOT, T_IDENT, T_EQ, T_NE, T_AMP,
    T_BAD
};

struct parser {
    const char *s;
    size_t pos;                 /* After the current token. */
    enum tok tok;
    size_t tok_pos;
    char ident[64];
    char *err;
    size_t err_size;
    bool failed;
};

static void
perr(struct parser *p, size_t pos, const char *fmt, ...)
{
    va_list args;
    char msg[200];

    if (p->failed) {
        return;
    }
    p->failed = true;
    va_start(args, fmt);
    vsnprintf(msg, sizeof msg, fmt, args);
    va_end(args);
    if (p->err && p->err_size) {
        snprintf(p->err, p->err_size, "column %zu: %s", pos + 1, msg);
    }
}

static const char *
tok_name(const struct parser *p)
{
    switch (p->tok) {
    case T_END: return "end of query";
    case T_LP: return "'('";
    case T_RP: return "')'";
    case T_AND: return "'and'";
    case T_OR: return "'or'";
    case T_NOT: return "'not'";
    case T_IDENT: return "a name";
    case T_EQ: return "'='";
    case T_NE: return "'!='";
    case T_AMP: return "'&'";
    case T_BAD: return "a stray character";
    }
    return "?";
}

static void
next(struct parser *p)
{
    const char *s = p->s;
    size_t i = p->pos;

    while (isspace((unsigned char) s[i])) {
        i++;
    }
    p->tok_pos = i;
    if (!s[i]) {
        p->tok = T_END;
    } else if (s[i] == '(') {
        p->tok = T_LP, i++;
    } else if (s[i] == ')') {
        p->tok = T_RP, i++;
    } else if (s[i] == '&' && s[i + 1] == '&') {
        p->tok = T_AND, i += 2;
    } else if (s[i] == '&') {
        p->tok = T_AMP, i++;
    } else if (s[i] == '|' && s[i + 1] == '|') {
        p->tok = T_OR, i += 2;
    } else if (s[i] == '!' && s[i + 1] == '=') {
        p->tok = T_NE, i += 2;
    } else if (s[i] == '!') {
        p->tok = T_NOT, i++;
    } else if (s[i] == '=') {
        p->tok = T_EQ, i += (s[i + 1] == '=') ? 2 : 1;
    } else if (isalpha((unsigned char) s[i]) || s[i] == '_') {
        size_t n = 0;

        while (isalnum((unsigned char) s[i]) || s[i] == '_') {
            if (n < sizeof p->ident - 1) {
                p->ident[n++] = tolower((unsigned char) s[i]);
            }
            i++;
        }
        p->ident[n] = '\0';
        p->tok = !strcmp(p->ident, "and") ? T_AND
                 : !strcmp(p->ident, "or") ? T_OR
                 : !strcmp(p->ident, "not") ? T_NOT : T_IDENT;
    } else {
        p->tok = T_BAD, i++;
    }
    p->pos = i;
}

enum field {
    F_SRC, F_DST, F_HOST, F_PROTO, F_SPORT, F_DPORT, F_PORT, F_FLAGS,
    F_VLAN, F_IN_PORT, F_TIME, F_IPVER
};

static const struct {
    const char *name;
    enum field f;
} fields[] = {
    { "src", F_SRC }, { "dst", F_DST }, { "host", F_HOST },
    { "proto", F_PROTO }, { "sport", F_SPORT }, { "dport", F_DPORT },
    { "port", F_PORT }, { "tcp_flags", F_FLAGS }, { "flags", F_FLAGS },
    { "vlan", F_VLAN }, { "in_port", F_IN_PORT }, { "time", F_TIME },
    { "ipver", F_IPVER },
};

static const struct {
    const char *name;
    uint8_t value;
} protos[] = {
    { "tcp", 6 }, { "udp", 17 }, { "icmp", 1 }, { "icmp6", 58 },
    { "sctp", 132 }, { "gre", 47 }, { "esp", 50 },
};

static const char *flag_names[8] = {
    "fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr"
};

/* Parses an unsigned number at s[0 .. len): decimal or 0x hex. */
static bool
parse_num(const char *s, size_t len, uint64_t max, uint64_t *v)
{
    char buf[32];
    char *end;

    if (!len || len >= sizeof buf || !isdigit((unsigned char) s[0])) {
        return false;
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    *v = strtoull(buf, &end, 0);
    return !errno && *end == '\0' && *v <= max;
}

/* A value of a numeric field: N, N-M, or a name ('names' may map it). */
static bool
parse_range(struct parser *p, size_t pos, const char *s, size_t len,
            enum field f, struct qrange *r)
{
    uint64_t max = f == F_PROTO || f == F_FLAGS ? 255
                   : f == F_SPORT || f == F_DPORT || f == F_PORT ? 65535
                   : f == F_VLAN ? 4095 : f == F_IPVER ? 6 : UINT32_MAX;
    const char *dash = memchr(s, '-', len);
    uint64_t lo, hi;
    size_t i;

    if (f == F_PROTO) {
        for (i = 0; i < sizeof protos / sizeof protos[0]; i++) {
            if (strlen(protos[i].name) == len
                && !strncasecmp(s, protos[i].name, len)) {
                r->lo = r->hi = protos[i].value;
                return true;
            }
        }
    }
    if (f == F_VLAN && len == 4 && !strncasecmp(s, "none", 4)) {
        r->lo = r->hi = 4096;
        return true;
    }
    if (f == F_FLAGS && isalpha((unsigned char) s[0])) {
        uint32_t m = 0;
        size_t start = 0;

        for (i = 0; i <= len; i++) {
            if (i == len || s[i] == '|') {
                int k;

                for (k = 0; k < 8; k++) {
                    if (strlen(flag_names[k]) == i - start
                        && !strncasecmp(s + start, flag_names[k],
                                        i - start)) {
                        break;
                    }
                }
                if (k == 8) {
                    perr(p, pos + start, "unknown TCP flag \"%.*s\" (fin, "
                         "syn, rst, psh, ack, urg, ece, cwr)",
                         (int) (i - start), s + start);
                    return false;
                }
                m |= 1u << k;
                start = i + 1;
            }
        }
        r->lo = r->hi = m;
        return true;
    }
    if (dash && f != F_IPVER && f != F_FLAGS) {
        if (!parse_num(s, dash - s, max, &lo)
            || !parse_num(dash + 1, len - (dash + 1 - s), max, &hi)) {
            perr(p, pos, "bad range \"%.*s\" (want N-M, each 0..%"PRIu64")",
                 (int) len, s, max);
            return false;
        }
        if (lo > hi) {
            perr(p, pos, "empty range \"%.*s\"", (int) len, s);
            return false;
        }
    } else if (!parse_num(s, len, max, &lo)) {
        perr(p, pos, "bad value \"%.*s\" (want a number 0..%"PRIu64"%s)",
             (int) len, s, max,
             f == F_PROTO ? " or tcp, udp, icmp, icmp6, sctp, gre, esp"
             : f == F_VLAN ? " or none"
             : f == F_FLAGS ? " or flag names joined by |" : "");
        return false;
    } else {
        hi = lo;
    }
    if (f == F_IPVER && lo != 4 && lo != 6) {
        perr(p, pos, "ipver must be 4 or 6");
        return false;
    }
    r->lo = lo;
    r->hi = hi;
    return true;
}

/* ADDR[/LEN] for one direction ('dst' selects the attributes). */
static struct qnode *
parse_addr(struct parser *p, size_t pos, const char *s, size_t len, bool dst)
{
    char buf[INET6_ADDRSTRLEN + 8];
    const char *slash = memchr(s, '/', len);
    size_t alen = slash ? (size_t) (slash - s) : len;
    uint8_t bytes[16];
    bool v6 = memchr(s, ':', alen) != NULL;
    uint64_t plen = v6 ? 128 : 32;
    struct qnode *acc = NULL;
    int i;

    if (alen >= sizeof buf) {
        perr(p, pos, "address too long");
        return NULL;
    }
    memcpy(buf, s, alen);
    buf[alen] = '\0';
    if (inet_pton(v6 ? AF_INET6 : AF_INET, buf, bytes) != 1) {
        perr(p, pos, "bad %s address \"%s\"", v6 ? "IPv6" : "IPv4", buf);
        return NULL;
    }
    if (slash && !parse_num(slash + 1, len - alen - 1, v6 ? 128 : 32,
                            &plen)) {
        perr(p, pos + alen + 1, "bad prefix length (0..%d)", v6 ? 128 : 32);
        return NULL;
    }
    if (!qnode_join(&acc, QN_AND,
                    qnode_set(GPU_INDEX_ATTR_IPVER, v6 ? 6 : 4, v6 ? 6 : 4))) {
        return NULL;
    }
    for (i = 0; i * 8 < (int) plen; i++) {
        int bits = plen - i * 8 >= 8 ? 8 : plen - i * 8;
        uint32_t lo = bytes[i] & (0xff00 >> bits) & 0xff;
        uint32_t hi = lo | (0xff >> bits);
        enum gpu_index_attr a = (dst ? GPU_INDEX_ATTR_DST0
                                     : GPU_INDEX_ATTR_SRC0) + i;

        if (!qnode_join(&acc, QN_AND, qnode_set(a, lo, hi))) {
            return NULL;
        }
    }
    return acc;
}

static struct qnode *parse_or(struct parser *);

/* One comma-separated item of a term's value. */
static struct qnode *
parse_item(struct parser *p, enum field f, enum tok op, size_t pos,
           const char *s, size_t len)
{
    struct qrange r;
    struct qnode *n = NULL;

    switch (f) {
    case F_SRC:
    case F_DST:
        return parse_addr(p, pos, s, len, f == F_DST);
    case F_HOST:
        n = parse_addr(p, pos, s, len, false);
        return n ? qnode_new(QN_OR, n, parse_addr(p, pos, s, len, true))
                 : NULL;
    default:
        break;
    }
    if (!parse_range(p, pos, s, len, f, &r)) {
        return NULL;
    }
    if (op == T_AMP) {
        n = qnode_new(QN_FLAGS, NULL, NULL);
        if (n) {
            n->mask = r.lo;
        }
        return n;
    }
    switch (f) {
    case F_PROTO: return qnode_set(GPU_INDEX_ATTR_PROTO, r.lo, r.hi);
    case F_SPORT: return qnode_set(GPU_INDEX_ATTR_SPORT, r.lo, r.hi);
    case F_DPORT: return qnode_set(GPU_INDEX_ATTR_DPORT, r.lo, r.hi);
    case F_PORT:
        n = qnode_set(GPU_INDEX_ATTR_SPORT, r.lo, r.hi);
        return n ? qnode_new(QN_OR, n,
                             qnode_set(GPU_INDEX_ATTR_DPORT, r.lo, r.hi))
                 : NULL;
    case F_FLAGS: return qnode_set(GPU_INDEX_ATTR_TCP_FLAGS, r.lo, r.hi);
    case F_VLAN: return qnode_set(GPU_INDEX_ATTR_VLAN, r.lo, r.hi);
    case F_IN_PORT: return qnode_set(GPU_INDEX_ATTR_IN_PORT, r.lo, r.hi);
    case F_TIME: return qnode_set(GPU_INDEX_ATTR_TIME, r.lo, r.hi);
    case F_IPVER: return qnode_set(GPU_INDEX_ATTR_IPVER, r.lo, r.hi);
    default: return NULL;
    }
}

static struct qnode *
parse_term(struct parser *p)
{
    size_t name_pos = p->tok_pos, i, start, end;
    struct qnode *acc = NULL;
    enum tok op;
    int fi = -1;

    for (i = 0; i < sizeof protos / sizeof protos[0]; i++) {
        if (!strcmp(p->ident, protos[i].name)) {
            next(p);
            return qnode_set(GPU_INDEX_ATTR_PROTO, protos[i].value,
                             protos[i].value);
        }
    }
    if (!strcmp(p->ident, "ip4") || !strcmp(p->ident, "ipv4")
        || !strcmp(p->ident, "ip6") || !strcmp(p->ident, "ipv6")) {
        uint32_t v = strchr(p->ident, '4') ? 4 : 6;

        next(p);
        return qnode_set(GPU_INDEX_ATTR_IPVER, v, v);
    }
    for (i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (!strcmp(p->ident, fields[i].name)) {
            fi = i;
        }
    }
    if (fi < 0) {
        perr(p, name_pos, "unknown field \"%s\" (src, dst, host, proto, "
             "sport, dport, port, tcp_flags, vlan, in_port, time, ipver, "
             "or tcp, udp, icmp, icmp6, sctp, ip4, ip6)", p->ident);
        return NULL;
    }
    next(p);
    op = p->tok;
    if (op != T_EQ && op != T_NE && op != T_AMP) {
        perr(p, p->tok_pos, "expected '=' or '!=' after \"%s\", not %s",
             fields[fi].name, tok_name(p));
        return NULL;
    }
    if (op == T_AMP && fields[fi].f != F_FLAGS) {
        perr(p, p->tok_pos, "'&' applies to tcp_flags only");
        return NULL;
    }
    /* The value: everything up to a space or a parenthesis. */
    start = p->pos;
    while (p->s[start] == ' ' || p->s[start] == '\t') {
        start++;
    }
    end = start;
    while (p->s[end] && !isspace((unsigned char) p->s[end])
           && p->s[end] != '(' && p->s[end] != ')') {
        end++;
    }
    if (end == start) {
        perr(p, start, "missing value after \"%s\"", fields[fi].name);
        return NULL;
    }
    for (i = start; i <= end; i++) {
        if (i == end || p->s[i] == ',') {
            if (i == start) {
                perr(p, i, "empty value in list");
                qnode_free(acc);
                return NULL;
            }
            if (!qnode_join(&acc, QN_OR,
                            parse_item(p, fields[fi].f, op, start,
                                       p->s + start, i - start))) {
                qnode_free(acc);
                return NULL;
            }
            start = i + 1;
        }
    }
    p->pos = end;
    next(p);
    return op == T_NE ? qnode_new(QN_NOT, acc, NULL) : acc;
}

static struct qnode *
parse_not(struct parser *p)
{
    struct qnode *n;

    switch (p->tok) {
    case T_NOT:
        next(p);
        n = parse_not(p);
        return n ? qnode_new(QN_NOT, n, NULL) : NULL;
    case T_LP: {
        size_t open = p->tok_pos;

        next(p);
        n = parse_or(p);
        if (!n) {
            return NULL;
        }
        if (p->tok != T_RP) {
            perr(p, p->tok_pos, "expected ')' to close the '(' at column "
                 "%zu, not %s", open + 1, tok_name(p));
            qnode_free(n);
            return NULL;
        }
        next(p);
        return n;
    }
    case T_IDENT:
        return parse_term(p);
    default:
        perr(p, p->tok_pos, "expected a term, 'not' or '(', not %s",
             tok_name(p));
        return NULL;
    }
}

static struct qnode *
parse_and(struct parser *p)
{
    struct qnode *acc = parse_not(p);

    while (acc && p->tok == T_AND) {
        next(p);
        if (!qnode_join(&acc, QN_AND, parse_not(p))) {
            qnode_free(acc);
            return NULL;
        }
    }
    return acc;
}

static struct qnode *
parse_or(struct parser *p)
{
    struct qnode *acc = parse_and(p);

    while (acc && p->tok == T_OR) {
        next(p);
        if (!qnode_join(&acc, QN_OR, parse_and(p))) {
            qnode_free(acc);
            return NULL;
        }
    }
    return acc;
}

int
gpu_index_query_parse(const char *text, struct gpu_index_query **qp,
                      char *err, size_t err_size)
{
    struct parser p;
    struct qnode *root;

    *qp = NULL;
    memset(&p, 0, sizeof p);
    p.s = text ? text : "";
    p.err = err;
    p.err_size = err_size;
    next(&p);
    root = parse_or(&p);
    if (root && p.tok != T_END) {
        perr(&p, p.tok_pos, "expected 'and', 'or' or the end, not %s",
             tok_name(&p));
        qnode_free(root);
        root = NULL;
    }
    if (!root) {
        if (!p.failed) {
            perr(&p, p.tok_pos, "out of memory");
            return GPU_ERR_NOMEM;
        }
        return GPU_ERR_INVALID;
    }
    *qp = calloc(1, sizeof **qp);
    if (!*qp) {
        qnode_free(root);
        return GPU_ERR_NOMEM;
    }
    (*qp)->root = root;
    return GPU_OK;
}
