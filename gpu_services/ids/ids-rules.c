/*
 * Rule parser and compiler: Snort/Suricata rule text -> the tables of
 * ids-inline.h (one Aho-Corasick DFA over every content pattern).
 *
 * Everything is built into fresh memory and handed out only when the
 * whole text parsed and compiled, so a failed load leaves nothing behind
 * and the caller keeps its old ruleset.
 */
#include <config.h>

#include "gpu_services/ids/ids-private.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The DFA is dense; refuse rule sets whose table would exceed this rather
 * than exhausting memory. */
#define IDS_MAX_TABLE_BYTES (1ull << 30)
#define IDS_MAX_UNSUPPORTED 16
#define IDS_MAX_PATTERN_LEN 65535
#define IDS_MAX_PORT_NESTING 8

#define ARRAY_SIZE(A) (sizeof (A) / sizeof (A)[0])

/* Grows '*p' (elements of 'elem' bytes, '*alloc' of them) to hold at
 * least 'need'.  Returns false on allocation failure, '*p' untouched. */
static bool
grow(void **p, size_t *alloc, size_t need, size_t elem)
{
    size_t n;
    void *q;

    if (need <= *alloc) {
        return true;
    }
    n = *alloc ? *alloc * 2 : 16;
    while (n < need) {
        n *= 2;
    }
    q = realloc(*p, n * elem);
    if (!q) {
        return false;
    }
    *p = q;
    *alloc = n;
    return true;
}

#define GROW(P, ALLOC, NEED) \
    grow((void **) &(P), &(ALLOC), (NEED), sizeof *(P))

/* ---- Parsed (not yet compiled) rules. ---- */

enum ids_buffer {
    BUF_RAW,                    /* The packet payload. */
    BUF_OTHER,                  /* http_*, file_data, ...: not ours. */
};

struct pcontent {
    uint8_t *bytes;
    uint32_t len;
    bool nocase, negated, fast_pattern;
    enum ids_buffer buffer;
    bool has_offset, has_depth, has_distance, has_within;
    int32_t offset, depth, distance, within;
};

struct prule {
    uint32_t sid;
    bool has_sid;
    char *msg;
    const char *action;
    uint8_t proto;
    bool bidir;
    struct gpu_ids_dport *ports;    /* src then dst. */
    size_t n_src, n_dst, n_ports, ports_alloc;
    struct pcontent *contents;
    size_t n_contents, contents_alloc;
    enum ids_buffer cur_buffer;     /* Sticky buffer for new contents. */
    bool skip_action, skip_proto, literal_addr;
    /* Option names this rule cannot honour, each once. */
    char *unsupported[IDS_MAX_UNSUPPORTED];
    size_t n_unsupported;
};

static void
prule_clear(struct prule *r)
{
    size_t i;

    free(r->msg);
    free(r->ports);
    for (i = 0; i < r->n_contents; i++) {
        free(r->contents[i].bytes);
    }
    free(r->contents);
    for (i = 0; i < r->n_unsupported; i++) {
        free(r->unsupported[i]);
    }
    memset(r, 0, sizeof *r);
}

/* A loaded rule waiting to be compiled. */
struct lrule {
    struct gpu_ids_drule d;         /* content, ports: filled later. */
    struct ids_rule_meta meta;
    struct pcontent *contents;      /* Owned. */
    size_t n_contents;
    struct gpu_ids_dport *ports;    /* Owned. */
};

struct parser {
    const char *name;
    uint32_t line;
    char *err;
    size_t err_size;
    struct gpu_ids_load_options opts;
    struct gpu_ids_ruleset_stats stats;

    struct lrule *rules;
    size_t n_rules, rules_alloc;

    struct ids_option_count *options;
    size_t n_options, options_alloc;
};

static int
perr(struct parser *p, const char *fmt, ...)
{
    va_list args;
    int n;

    if (!p->err || !p->err_size) {
        return GPU_ERR_INVALID;
    }
    n = snprintf(p->err, p->err_size, "%s:%u: ", p->name, p->line);
    if (n >= 0 && (size_t) n < p->err_size) {
        va_start(args, fmt);
        vsnprintf(p->err + n, p->err_size - n, fmt, args);
        va_end(args);
    }
    return GPU_ERR_INVALID;
}

static int
note_unsupported(struct prule *r, const char *name, size_t len)
{
    size_t i;

    for (i = 0; i < r->n_unsupported; i++) {
        if (strlen(r->unsupported[i]) == len
            && !memcmp(r->unsupported[i], name, len)) {
            return GPU_OK;
        }
    }
    if (r->n_unsupported >= IDS_MAX_UNSUPPORTED) {
        return GPU_OK;          /* The rule is unsupported either way. */
    }
    r->unsupported[r->n_unsupported] = strndup(name, len);
    if (!r->unsupported[r->n_unsupported]) {
        return GPU_ERR_NOMEM;
    }
    r->n_unsupported++;
    return GPU_OK;
}

/* ---- Small lexical helpers. ---- */

static const char *
skip_ws(const char *s, const char *end)
{
    while (s < end && isspace((unsigned char) *s)) {
        s++;
    }
    return s;
}

static const char *
trim_end(const char *s, const char *end)
{
    while (end > s && isspace((unsigned char) end[-1])) {
        end--;
    }
    return end;
}

static bool
word_is(const char *s, size_t len, const char *word)
{
    return strlen(word) == len && !strncmp(s, word, len);
}

/* Parses a decimal integer filling [s, end) exactly. */
static bool
parse_int(const char *s, const char *end, long min, long max, long *out)
{
    char buf[32];
    char *tail;
    size_t len = end - s;
    long v;

    if (!len || len >= sizeof buf) {
        return false;
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    v = strtol(buf, &tail, 10);
    if (errno || *tail || tail == buf || v < min || v > max) {
        return false;
    }
    *out = v;
    return true;
}

static int
hexval(int c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c = tolower(c);
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

/* Parses a quoted string [s, end) (with surrounding whitespace) with
 * backslash escapes and, if 'hex', |hex bytes| sections.  Returns the
 * bytes in '*outp' (malloc'd) and their count in '*lenp'. */
static int
parse_quoted(struct parser *p, const char *what, const char *s,
             const char *end, bool hex, uint8_t **outp, uint32_t *lenp)
{
    uint8_t *out;
    size_t n = 0;
    bool in_hex = false;
    int hi = -1;

    s = skip_ws(s, end);
    end = trim_end(s, end);
    if (end - s < 2 || *s != '"' || end[-1] != '"') {
        return perr(p, "%s: expected a quoted string", what);
    }
    s++;
    end--;
    out = malloc(end - s + 1);
    if (!out) {
        return GPU_ERR_NOMEM;
    }
    while (s < end) {
        int c = (unsigned char) *s++;

        if (in_hex) {
            if (c == '|') {
                if (hi >= 0) {
                    free(out);
                    return perr(p, "%s: odd number of hex digits", what);
                }
                in_hex = false;
            } else if (isspace(c)) {
                if (hi >= 0) {
                    free(out);
                    return perr(p, "%s: split hex byte", what);
                }
            } else if (hexval(c) < 0) {
                free(out);
                return perr(p, "%s: bad hex digit '%c'", what, c);
            } else if (hi < 0) {
                hi = hexval(c);
            } else {
                out[n++] = hi << 4 | hexval(c);
                hi = -1;
            }
        } else if (c == '|' && hex) {
            in_hex = true;
        } else if (c == '\\') {
            if (s >= end) {
                free(out);
                return perr(p, "%s: string ends in a backslash", what);
            }
            out[n++] = *s++;
        } else if (c == '"') {
            free(out);
            return perr(p, "%s: unescaped quote inside the string", what);
        } else {
            out[n++] = c;
        }
    }
    if (in_hex) {
        free(out);
        return perr(p, "%s: unterminated |hex| section", what);
    }
    if (n > IDS_MAX_PATTERN_LEN) {
        free(out);
        return perr(p, "%s: longer than %d bytes", what,
                    IDS_MAX_PATTERN_LEN);
    }
    *outp = out;
    *lenp = n;
    return GPU_OK;
}

/* ---- Ports. ---- */

static const struct {
    const char *name;
    const char *value;
} port_vars[] = {
    { "HTTP_PORTS", "[80,81,311,383,591,593,901,1220,1414,1741,1830,2301,"
      "2381,2809,3037,3128,3702,4343,4848,5250,6988,7000,7001,7144,7145,"
      "7510,7777,7779,8000,8008,8014,8028,8080,8085,8088,8090,8118,8123,"
      "8180,8181,8243,8280,8300,8800,8888,8899,9000,9060,9080,9090,9091,"
      "9443,9999,11371,34443,34444,41080,50002,55555]" },
    { "SHELLCODE_PORTS", "!80" },
    { "ORACLE_PORTS", "1024:" },
    { "SSH_PORTS", "22" },
    { "FTP_PORTS", "[21,2100,3535]" },
    { "SIP_PORTS", "[5060,5061,5600]" },
    { "FILE_DATA_PORTS", "[$HTTP_PORTS,110,143]" },
    { "GTP_PORTS", "[2123,2152,3386]" },
};

/* Port specs evaluate to sets of ports, kept as sorted disjoint ranges.
 * Snort's rules: a list is the union of its plain elements (all ports if
 * there are none) minus the union of its negated ones, and a negated
 * spec is the complement, so "![1:1023,!22]" is 0, 22 and 1024-65535. */
struct pset {
    struct gpu_ids_dport *r;
    size_t n, alloc;
};

struct port_cursor {
    const char *s, *end;
};

static int
pset_add(struct pset *s, uint32_t lo, uint32_t hi)
{
    if (!GROW(s->r, s->alloc, s->n + 1)) {
        return GPU_ERR_NOMEM;
    }
    s->r[s->n].lo = lo;
    s->r[s->n].hi = hi;
    s->r[s->n].neg = 0;
    s->r[s->n].pad = 0;
    s->n++;
    return GPU_OK;
}

static int
cmp_range(const void *a_, const void *b_)
{
    const struct gpu_ids_dport *a = a_, *b = b_;

    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* Sorts and merges overlapping or adjacent ranges. */
static void
pset_normalize(struct pset *s)
{
    size_t i, w = 0;

    if (s->n) {
        qsort(s->r, s->n, sizeof *s->r, cmp_range);
    }
    for (i = 0; i < s->n; i++) {
        if (w && (uint32_t) s->r[i].lo <= (uint32_t) s->r[w - 1].hi + 1) {
            if (s->r[i].hi > s->r[w - 1].hi) {
                s->r[w - 1].hi = s->r[i].hi;
            }
        } else {
            s->r[w++] = s->r[i];
        }
    }
    s->n = w;
}

/* 's' = its complement in 0..65535 ('s' normalized). */
static int
pset_complement(struct pset *s)
{
    struct pset c = { NULL, 0, 0 };
    uint32_t next = 0;
    size_t i;
    int error = GPU_OK;

    for (i = 0; i < s->n && !error; i++) {
        if (s->r[i].lo > next) {
            error = pset_add(&c, next, s->r[i].lo - 1);
        }
        next = s->r[i].hi + 1u;
    }
    if (!error && next <= 65535) {
        error = pset_add(&c, next, 65535);
    }
    free(s->r);
    *s = c;
    return error;
}

/* 'a' = a minus b (both normalized). */
static int
pset_subtract(struct pset *a, struct pset *b)
{
    struct pset out = { NULL, 0, 0 };
    size_t i, j;
    int error = pset_complement(b);

    /* Intersection of a and the complement of b, two pointers. */
    for (i = j = 0; !error && i < a->n && j < b->n;) {
        uint32_t lo = a->r[i].lo > b->r[j].lo ? a->r[i].lo : b->r[j].lo;
        uint32_t hi = a->r[i].hi < b->r[j].hi ? a->r[i].hi : b->r[j].hi;

        if (lo <= hi) {
            error = pset_add(&out, lo, hi);
        }
        if (a->r[i].hi < b->r[j].hi) {
            i++;
        } else {
            j++;
        }
    }
    free(a->r);
    *a = out;
    return error;
}

static int port_list(struct parser *, struct port_cursor *, int depth,
                     struct pset *);

/* One element of a list into '*out' (normalized); '*negated' says
 * whether it was written with '!'. */
static int
port_elem(struct parser *p, struct port_cursor *c, int depth,
          struct pset *out, bool *negated)
{
    const char *s = skip_ws(c->s, c->end);
    const char *e;
    long lo = 0, hi = 65535;
    int error;

    *negated = false;
    if (depth > IDS_MAX_PORT_NESTING) {
        return perr(p, "ports nested too deeply");
    }
    if (s >= c->end) {
        return perr(p, "empty port");
    }
    if (*s == '!') {
        bool inner_neg;

        c->s = s + 1;
        error = port_elem(p, c, depth + 1, out, &inner_neg);
        if (!error && inner_neg) {
            error = pset_complement(out);
        }
        *negated = true;
        return error;
    }
    if (*s == '[') {
        c->s = s + 1;
        error = port_list(p, c, depth + 1, out);
        if (error) {
            return error;
        }
        s = skip_ws(c->s, c->end);
        if (s >= c->end || *s != ']') {
            return perr(p, "port list without ']'");
        }
        c->s = s + 1;
        return GPU_OK;
    }
    if (*s == '$') {
        const char *name = ++s;
        size_t i;

        while (s < c->end && (isalnum((unsigned char) *s) || *s == '_')) {
            s++;
        }
        c->s = s;
        for (i = 0; i < ARRAY_SIZE(port_vars); i++) {
            if (word_is(name, s - name, port_vars[i].name)) {
                struct port_cursor vc;

                vc.s = port_vars[i].value;
                vc.end = vc.s + strlen(vc.s);
                return port_list(p, &vc, depth + 1, out);
            }
        }
        /* Unknown: as any. */
        p->stats.n_unknown_vars++;
        return pset_add(out, 0, 65535);
    }
    if (c->end - s >= 3 && !strncmp(s, "any", 3)) {
        c->s = s + 3;
        return pset_add(out, 0, 65535);
    }

    /* N, N:, :M, N:M. */
    e = s;
    while (e < c->end && isdigit((unsigned char) *e)) {
        e++;
    }
    if (e > s && !parse_int(s, e, 0, 65535, &lo)) {
        return perr(p, "bad port '%.*s'", (int) (e - s), s);
    }
    if (e < c->end && *e == ':') {
        const char *h = ++e;

        while (e < c->end && isdigit((unsigned char) *e)) {
            e++;
        }
        if (e > h && !parse_int(h, e, 0, 65535, &hi)) {
            return perr(p, "bad port '%.*s'", (int) (e - h), h);
        }
        if (e == h && s + 1 == h) {
            return perr(p, "bad port range ':'");
        }
    } else if (e == s) {
        return perr(p, "bad port '%.*s'", (int) (c->end - s), s);
    } else {
        hi = lo;
    }
    if (lo > hi) {
        return perr(p, "empty port range %ld:%ld", lo, hi);
    }
    c->s = e;
    return pset_add(out, lo, hi);
}

/* A comma-separated list: plain elements united, negated ones taken
 * away. */
static int
port_list(struct parser *p, struct port_cursor *c, int depth,
          struct pset *out)
{
    struct pset plus = { NULL, 0, 0 }, minus = { NULL, 0, 0 };
    bool any_plus = false;
    int error;

    for (;;) {
        struct pset e = { NULL, 0, 0 };
        bool negated;
        const char *s;
        size_t i;

        error = port_elem(p, c, depth, &e, &negated);
        for (i = 0; !error && i < e.n; i++) {
            error = pset_add(negated ? &minus : &plus, e.r[i].lo,
                             e.r[i].hi);
        }
        any_plus |= !negated;
        free(e.r);
        if (error) {
            break;
        }
        s = skip_ws(c->s, c->end);
        if (s < c->end && *s == ',') {
            c->s = s + 1;
            continue;
        }
        c->s = s;
        break;
    }
    if (!error && !any_plus) {
        error = pset_add(&plus, 0, 65535);
    }
    if (!error) {
        pset_normalize(&plus);
        pset_normalize(&minus);
        error = pset_subtract(&plus, &minus);
    }
    free(minus.r);
    if (!error) {
        size_t i;

        for (i = 0; !error && i < plus.n; i++) {
            error = pset_add(out, plus.r[i].lo, plus.r[i].hi);
        }
        pset_normalize(out);
    }
    free(plus.r);
    return error;
}

/* Appends the ranges of port spec [s, s + len) to r->ports and returns
 * their number in '*n' (0 for any; an empty set is the empty range
 * 1:0, which no port is in). */
static int
parse_ports(struct parser *p, struct prule *r, const char *s, size_t len,
            size_t *n)
{
    struct port_cursor c = { s, s + len };
    struct pset set = { NULL, 0, 0 };
    size_t i;
    int error;

    *n = 0;
    if (word_is(s, len, "any")) {
        return GPU_OK;
    }
    error = port_list(p, &c, 0, &set);
    if (!error && skip_ws(c.s, c.end) != c.end) {
        error = perr(p, "junk after ports: '%.*s'", (int) (c.end - c.s),
                     c.s);
    }
    if (!error && set.n == 1 && set.r[0].lo == 0 && set.r[0].hi == 65535) {
        set.n = 0;              /* Any. */
    } else if (!error && !set.n) {
        error = pset_add(&set, 1, 0);
    }
    if (!GROW(r->ports, r->ports_alloc, r->n_ports + set.n)) {
        error = GPU_ERR_NOMEM;
    }
    for (i = 0; !error && i < set.n; i++) {
        r->ports[r->n_ports++] = set.r[i];
    }
    if (!error) {
        *n = set.n;
    }
    free(set.r);
    return error;
}

/* ---- Addresses. ---- */

/* Addresses are not in a batch: variables and any are any; a literal
 * address cannot be honoured.  Only the syntax is checked. */
static int
parse_addr(struct parser *p, struct prule *r, const char *s, size_t len)
{
    size_t i;
    bool literal = false;

    for (i = 0; i < len; i++) {
        unsigned char c = s[i];

        if (c == '$') {
            /* Skip the variable's name. */
            while (i + 1 < len && (isalnum((unsigned char) s[i + 1])
                                   || s[i + 1] == '_')) {
                i++;
            }
        } else if (c == 'a' && len - i >= 3 && !strncmp(s + i, "any", 3)) {
            i += 2;
        } else if (isxdigit(c) || c == '.' || c == ':' || c == '/') {
            literal = true;
        } else if (c != '!' && c != '[' && c != ']' && c != ',') {
            return perr(p, "bad address '%.*s'", (int) len, s);
        }
    }
    if (literal) {
        r->literal_addr = true;
    }
    return GPU_OK;
}

/* ---- Options. ---- */

static struct pcontent *
last_content(struct prule *r)
{
    return r->n_contents ? &r->contents[r->n_contents - 1] : NULL;
}

static const char *const ignored_options[] = {
    "msg", "sid", "rev", "gid", "classtype", "reference", "metadata",
    "priority", "rawbytes",
};

static const char *const http_modifiers[] = {
    "http_uri", "http_raw_uri", "http_header", "http_raw_header",
    "http_cookie", "http_raw_cookie", "http_client_body", "http_method",
    "http_stat_code", "http_stat_msg",
};

static const char *const sticky_buffers[] = {
    "file_data", "base64_data", "dce_stub_data", "sip_header", "sip_body",
    "js_data", "raw_data",
};

static bool
in_list(const char *const *list, size_t n, const char *s, size_t len)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (word_is(s, len, list[i])) {
            return true;
        }
    }
    return false;
}

static int
parse_modifier(struct parser *p, struct prule *r, const char *name,
               size_t nlen, const char *v, const char *vend, bool has_v)
{
    struct pcontent *c = last_content(r);
    bool *has;
    int32_t *field;
    long min, val;

    if (!c) {
        return perr(p, "%.*s without a preceding content", (int) nlen, name);
    }
    if (word_is(name, nlen, "nocase")) {
        c->nocase = true;
        return GPU_OK;
    }
    if (word_is(name, nlen, "fast_pattern")) {
        c->fast_pattern = true;
        return GPU_OK;
    }
    if (word_is(name, nlen, "offset")) {
        has = &c->has_offset, field = &c->offset, min = INT32_MIN;
    } else if (word_is(name, nlen, "depth")) {
        has = &c->has_depth, field = &c->depth, min = 1;
    } else if (word_is(name, nlen, "distance")) {
        has = &c->has_distance, field = &c->distance, min = INT32_MIN;
    } else {
        has = &c->has_within, field = &c->within, min = 1;
    }
    if (!has_v) {
        return perr(p, "%.*s needs a value", (int) nlen, name);
    }
    if (*has) {
        return perr(p, "%.*s given twice for one content", (int) nlen, name);
    }
    v = skip_ws(v, vend);
    vend = trim_end(v, vend);
    if (!parse_int(v, vend, min, INT32_MAX, &val)) {
        if (v < vend && (isalpha((unsigned char) *v) || *v == '_')) {
            /* A byte_extract variable: cannot be honoured. */
            return note_unsupported(r, "byte_extract variable", 21);
        }
        return perr(p, "%.*s: bad value '%.*s'", (int) nlen, name,
                    (int) (vend - v), v);
    }
    *has = true;
    *field = val;
    if ((c->has_offset || c->has_depth)
        && (c->has_distance || c->has_within)) {
        return perr(p, "content mixes offset/depth with distance/within");
    }
    return GPU_OK;
}

static int
parse_option(struct parser *p, struct prule *r, const char *name,
             size_t nlen, const char *v, const char *vend, bool has_v)
{
    if (word_is(name, nlen, "content")) {
        struct pcontent c;
        int error;

        if (!has_v) {
            return perr(p, "content needs a value");
        }
        memset(&c, 0, sizeof c);
        v = skip_ws(v, vend);
        if (v < vend && *v == '!') {
            c.negated = true;
            v++;
        }
        error = parse_quoted(p, "content", v, vend, true, &c.bytes, &c.len);
        if (error) {
            return error;
        }
        if (!c.len) {
            free(c.bytes);
            return perr(p, "empty content");
        }
        c.buffer = r->cur_buffer;
        if (!GROW(r->contents, r->contents_alloc, r->n_contents + 1)) {
            free(c.bytes);
            return GPU_ERR_NOMEM;
        }
        r->contents[r->n_contents++] = c;
        if (c.negated) {
            return note_unsupported(r, "content:!", 9);
        }
        return GPU_OK;
    }
    if (word_is(name, nlen, "nocase") || word_is(name, nlen, "offset")
        || word_is(name, nlen, "depth") || word_is(name, nlen, "distance")
        || word_is(name, nlen, "within")
        || word_is(name, nlen, "fast_pattern")) {
        return parse_modifier(p, r, name, nlen, v, vend, has_v);
    }
    if (word_is(name, nlen, "msg")) {
        uint8_t *msg;
        uint32_t len;
        int error;

        if (!has_v) {
            return perr(p, "msg needs a value");
        }
        error = parse_quoted(p, "msg", v, vend, false, &msg, &len);
        if (error) {
            return error;
        }
        msg[len] = '\0';        /* parse_quoted() left room for it. */
        free(r->msg);
        r->msg = (char *) msg;
        return GPU_OK;
    }
    if (word_is(name, nlen, "sid")) {
        long sid;

        v = skip_ws(v, vend);
        if (!has_v || !parse_int(v, trim_end(v, vend), 1, UINT32_MAX >> 1,
                                 &sid)) {
            return perr(p, "bad sid");
        }
        r->sid = sid;
        r->has_sid = true;
        return GPU_OK;
    }
    if (word_is(name, nlen, "pkt_data")) {
        r->cur_buffer = BUF_RAW;
        return GPU_OK;
    }
    if (in_list(ignored_options, ARRAY_SIZE(ignored_options), name, nlen)) {
        return GPU_OK;
    }
    if (in_list(http_modifiers, ARRAY_SIZE(http_modifiers), name, nlen)) {
        struct pcontent *c = last_content(r);

        if (!c) {
            return perr(p, "%.*s without a preceding content", (int) nlen,
                        name);
        }
        c->buffer = BUF_OTHER;
        return note_unsupported(r, name, nlen);
    }
    if (in_list(sticky_buffers, ARRAY_SIZE(sticky_buffers), name, nlen)
        || (!has_v && memchr(name, '.', nlen))) {
        /* Snort's sticky buffers, and Suricata's (http.uri; ...). */
        r->cur_buffer = BUF_OTHER;
        return note_unsupported(r, name, nlen);
    }
    return note_unsupported(r, name, nlen);
}

/* Splits "(opt; opt: value; ...)" body [s, end) into options. */
static int
parse_options(struct parser *p, struct prule *r, const char *s,
              const char *end)
{
    for (;;) {
        const char *name, *nend, *v = NULL, *vend = NULL;
        bool has_v = false;
        int error;

        s = skip_ws(s, end);
        if (s >= end) {
            return GPU_OK;
        }
        name = s;
        while (s < end && *s != ':' && *s != ';') {
            s++;
        }
        nend = trim_end(name, s);
        if (nend == name) {
            return perr(p, "empty option name");
        }
        for (const char *q = name; q < nend; q++) {
            if (!isalnum((unsigned char) *q) && *q != '_' && *q != '.'
                && *q != '-') {
                return perr(p, "bad option name '%.*s'",
                            (int) (nend - name), name);
            }
        }
        if (s < end && *s == ':') {
            bool in_quote = false;

            v = ++s;
            while (s < end && (in_quote || *s != ';')) {
                if (*s == '\\' && s + 1 < end) {
                    s += 2;
                    continue;
                }
                if (*s == '"') {
                    in_quote = !in_quote;
                }
                s++;
            }
            if (in_quote) {
                return perr(p, "%.*s: unterminated string",
                            (int) (nend - name), name);
            }
            vend = s;
            has_v = true;
        }
        if (s >= end) {
            return perr(p, "option '%.*s' not terminated by ';'",
                        (int) (nend - name), name);
        }
        s++;                    /* The ';'. */
        error = parse_option(p, r, name, nend - name, v, vend, has_v);
        if (error) {
            return error;
        }
    }
}

/* ---- Rule lines. ---- */

static const struct {
    const char *name;
    bool loaded;
} actions[] = {
    { "alert", true }, { "log", true }, { "drop", true },
    { "reject", true }, { "sdrop", true },
    { "pass", false }, { "activate", false }, { "dynamic", false },
};

static bool
is_action(const char *s, const char *end)
{
    const char *w = s;
    size_t i;

    while (s < end && isalpha((unsigned char) *s)) {
        s++;
    }
    if (s >= end || !isspace((unsigned char) *s)) {
        return false;
    }
    for (i = 0; i < ARRAY_SIZE(actions); i++) {
        if (word_is(w, s - w, actions[i].name)) {
            return true;
        }
    }
    return false;
}

/* Next header token of [*sp, end): a word, or a [list] with spaces. */
static bool
next_token(const char **sp, const char *end, const char **tok, size_t *len)
{
    const char *s = skip_ws(*sp, end);
    int depth = 0;

    *tok = s;
    while (s < end && (depth > 0 || !isspace((unsigned char) *s))) {
        if (*s == '[') {
            depth++;
        } else if (*s == ']') {
            depth--;
        } else if (*s == '(' && !depth) {
            break;
        }
        s++;
    }
    *len = s - *tok;
    *sp = s;
    return *len > 0;
}

static int
parse_rule(struct parser *p, struct prule *r, const char *s, const char *end)
{
    const char *tok, *open, *close;
    size_t len, i;
    int error;

    memset(r, 0, sizeof *r);
    r->msg = NULL;

    /* Action. */
    if (!next_token(&s, end, &tok, &len)) {
        return perr(p, "empty rule");
    }
    for (i = 0; i < ARRAY_SIZE(actions); i++) {
        if (word_is(tok, len, actions[i].name)) {
            r->action = actions[i].name;
            r->skip_action = !actions[i].loaded;
            break;
        }
    }
    if (!r->action) {
        return perr(p, "unknown action '%.*s'", (int) len, tok);
    }

    /* Protocol. */
    if (!next_token(&s, end, &tok, &len)) {
        return perr(p, "missing protocol");
    }
    if (word_is(tok, len, "tcp")) {
        r->proto = GPU_IDS_PROTO_TCP;
    } else if (word_is(tok, len, "udp")) {
        r->proto = GPU_IDS_PROTO_UDP;
    } else if (word_is(tok, len, "icmp")) {
        r->proto = GPU_IDS_PROTO_ICMP;
    } else if (word_is(tok, len, "ip")) {
        r->proto = GPU_IDS_PROTO_IP;
    } else {
        for (i = 0; i < len; i++) {
            if (!isalnum((unsigned char) tok[i]) && tok[i] != '-'
                && tok[i] != '_' && tok[i] != '.') {
                return perr(p, "bad protocol '%.*s'", (int) len, tok);
            }
        }
        r->skip_proto = true;
    }

    /* src_addr src_port dir dst_addr dst_port. */
    if (!next_token(&s, end, &tok, &len)) {
        return perr(p, "missing source address");
    }
    error = parse_addr(p, r, tok, len);
    if (error) {
        return error;
    }
    if (!next_token(&s, end, &tok, &len)) {
        return perr(p, "missing source port");
    }
    error = parse_ports(p, r, tok, len, &r->n_src);
    if (error) {
        return error;
    }
    if (!next_token(&s, end, &tok, &len)) {
        return perr(p, "missing direction");
    }
    if (word_is(tok, len, "<>")) {
        r->bidir = true;
    } else if (!word_is(tok, len, "->")) {
        return perr(p, "bad direction '%.*s' (expected -> or <>)",
                    (int) len, tok);
    }
    if (!next_token(&s, end, &tok, &len)) {
        return perr(p, "missing destination address");
    }
    error = parse_addr(p, r, tok, len);
    if (error) {
        return error;
    }
    if (!next_token(&s, end, &tok, &len)) {
        return perr(p, "missing destination port");
    }
    error = parse_ports(p, r, tok, len, &r->n_dst);
    if (error) {
        return error;
    }

    /* (options) */
    open = skip_ws(s, end);
    close = trim_end(open, end);
    if (open >= end || *open != '(') {
        return perr(p, "expected '(' after the rule header");
    }
    if (close <= open + 1 || close[-1] != ')') {
        return perr(p, "rule options not closed by ')'");
    }
    error = parse_options(p, r, open + 1, close - 1);
    if (error) {
        return error;
    }
    if (!r->has_sid) {
        return perr(p, "rule has no sid");
    }
    return GPU_OK;
}

static int
count_option(struct parser *p, const char *name)
{
    size_t i;

    for (i = 0; i < p->n_options; i++) {
        if (!strcmp(p->options[i].name, name)) {
            p->options[i].count++;
            return GPU_OK;
        }
    }
    if (!GROW(p->options, p->options_alloc, p->n_options + 1)) {
        return GPU_ERR_NOMEM;
    }
    p->options[p->n_options].name = strdup(name);
    if (!p->options[p->n_options].name) {
        return GPU_ERR_NOMEM;
    }
    p->options[p->n_options++].count = 1;
    return GPU_OK;
}

/* Decides whether parsed rule 'r' is loaded, and if so moves it into
 * p->rules. */
static int
admit_rule(struct parser *p, struct prule *r)
{
    enum gpu_ids_skip_reason reason = GPU_IDS_SKIP_N_REASONS;
    bool partial = false;
    size_t i, n_kept = 0;
    bool prev_ok = true;
    struct lrule *lr;
    int error;

    p->stats.n_rules++;
    for (i = 0; i < r->n_unsupported; i++) {
        error = count_option(p, r->unsupported[i]);
        if (error) {
            return error;
        }
    }

    /* Contents the payload scan can honour; in partial mode, the others
     * keep their bytes but not their positions. */
    for (i = 0; i < r->n_contents; i++) {
        struct pcontent *c = &r->contents[i];
        bool relative = c->has_distance || c->has_within;

        if (c->negated) {
            free(c->bytes);
            c->bytes = NULL;
            prev_ok = false;
            continue;
        }
        if (c->buffer != BUF_RAW || (relative && !prev_ok)) {
            c->has_offset = c->has_depth = false;
            c->has_distance = c->has_within = false;
        }
        prev_ok = c->buffer == BUF_RAW;
        r->contents[n_kept++] = *c;
    }
    r->n_contents = n_kept;

    if (r->skip_action) {
        reason = GPU_IDS_SKIP_ACTION;
    } else if (r->skip_proto) {
        reason = GPU_IDS_SKIP_PROTOCOL;
    } else if (!n_kept) {
        reason = GPU_IDS_SKIP_NO_CONTENT;
    } else if (n_kept > GPU_IDS_MAX_CONTENTS) {
        reason = GPU_IDS_SKIP_TOO_MANY;
    } else if (r->n_unsupported) {
        reason = GPU_IDS_SKIP_OPTION;
        partial = true;
    } else if (r->literal_addr) {
        reason = GPU_IDS_SKIP_ADDRESS;
        partial = true;
    }
    if (reason != GPU_IDS_SKIP_N_REASONS
        && !(partial && p->opts.partial)) {
        p->stats.n_skipped++;
        p->stats.n_skipped_by[reason]++;
        return GPU_OK;
    }

    if (!GROW(p->rules, p->rules_alloc, p->n_rules + 1)) {
        return GPU_ERR_NOMEM;
    }
    lr = &p->rules[p->n_rules++];
    memset(lr, 0, sizeof *lr);
    lr->d.sid = r->sid;
    lr->d.n_contents = n_kept;
    lr->d.n_src = r->n_src;
    lr->d.n_dst = r->n_dst;
    lr->d.proto = r->proto;
    lr->d.flags = r->bidir ? GPU_IDS_R_BIDIR : 0;
    lr->meta.line = p->line;
    lr->meta.msg = r->msg ? r->msg : strdup("");
    lr->meta.action = r->action;
    lr->meta.partial = partial;
    r->msg = NULL;
    lr->contents = r->contents;
    lr->n_contents = n_kept;
    r->contents = NULL;
    r->n_contents = 0;
    lr->ports = r->ports;
    r->ports = NULL;
    if (!lr->meta.msg) {
        return GPU_ERR_NOMEM;
    }

    /* The anchor: the first fast_pattern content, else the longest (the
     * rarest, as a rule of thumb). */
    lr->meta.anchor = 0;
    for (i = 0; i < n_kept; i++) {
        if (lr->contents[i].fast_pattern) {
            lr->meta.anchor = i;
            break;
        }
        if (lr->contents[i].len > lr->contents[lr->meta.anchor].len) {
            lr->meta.anchor = i;
        }
    }

    p->stats.n_loaded++;
    if (partial) {
        p->stats.n_partial++;
    }
    return GPU_OK;
}

/* One logical line (continuations joined, trailing newline gone). */
static int
parse_line(struct parser *p, const char *s, const char *end)
{
    struct prule r;
    bool commented = false;
    int error;

    s = skip_ws(s, end);
    end = trim_end(s, end);
    if (s >= end) {
        return GPU_OK;
    }
    if (*s == '#') {
        if (!p->opts.commented) {
            return GPU_OK;
        }
        s = skip_ws(s + 1, end);
        if (!is_action(s, end)) {
            return GPU_OK;      /* A real comment. */
        }
        commented = true;
    }
    memset(&r, 0, sizeof r);
    error = parse_rule(p, &r, s, end);
    if (error == GPU_ERR_INVALID && commented) {
        /* A commented line that only looks like a rule is a comment. */
        prule_clear(&r);
        if (p->err && p->err_size) {
            p->err[0] = '\0';
        }
        return GPU_OK;
    }
    if (!error) {
        error = admit_rule(p, &r);
    }
    prule_clear(&r);
    return error;
}

static int
parse_text(struct parser *p, const char *text)
{
    const char *s = text;
    char *joined = NULL;
    size_t joined_len = 0, joined_alloc = 0;
    uint32_t line = 0;
    int error = GPU_OK;

    while (*s) {
        const char *nl = strchr(s, '\n');
        const char *e = nl ? nl : s + strlen(s);
        const char *le = e;

        line++;
        if (le > s && le[-1] == '\r') {
            le--;
        }
        if (!joined_len) {
            p->line = line;
        }
        if (le > s && le[-1] == '\\') {
            /* Continued on the next line. */
            if (!GROW(joined, joined_alloc, joined_len + (le - s))) {
                error = GPU_ERR_NOMEM;
                break;
            }
            memcpy(joined + joined_len, s, le - 1 - s);
            joined_len += le - 1 - s;
        } else if (joined_len) {
            if (!GROW(joined, joined_alloc, joined_len + (le - s) + 1)) {
                error = GPU_ERR_NOMEM;
                break;
            }
            memcpy(joined + joined_len, s, le - s);
            joined_len += le - s;
            p->stats.n_lines++;
            error = parse_line(p, joined, joined + joined_len);
            joined_len = 0;
        } else {
            p->stats.n_lines++;
            error = parse_line(p, s, le);
        }
        if (error) {
            break;
        }
        s = nl ? nl + 1 : e;
    }
    if (!error && joined_len) {
        p->stats.n_lines++;
        error = parse_line(p, joined, joined + joined_len);
    }
    free(joined);
    return error;
}

/* ---- Compiling: patterns and the automaton. ---- */

static uint64_t
hash_bytes(const uint8_t *b, size_t n, uint32_t nocase)
{
    uint64_t h = 0xcbf29ce484222325ULL ^ nocase;
    size_t i;

    for (i = 0; i < n; i++) {
        h = (h ^ b[i]) * 0x100000001b3ULL;
    }
    return h ^ (h >> 29);
}

struct builder {
    struct gpu_ids_ruleset *rs;
    size_t patterns_alloc, pbytes_alloc, out_ids_alloc;
    uint32_t *phash;            /* Open addressing: pattern id + 1. */
    size_t phash_size;          /* Power of 2. */
};

/* The id of the pattern (bytes, nocase), added if new.  'bytes' are
 * already lowercased if nocase. */
static int
intern_pattern(struct builder *b, const uint8_t *bytes, uint32_t len,
               bool nocase, uint32_t *idp)
{
    struct gpu_ids_ruleset *rs = b->rs;
    size_t mask = b->phash_size - 1;
    size_t i = hash_bytes(bytes, len, nocase) & mask;
    struct gpu_ids_dpattern *pt;

    for (;; i = (i + 1) & mask) {
        uint32_t id = b->phash[i];

        if (!id) {
            break;
        }
        pt = &rs->patterns[id - 1];
        if (pt->len == len && pt->nocase == nocase
            && !memcmp(rs->pbytes + pt->bytes, bytes, len)) {
            *idp = id - 1;
            return GPU_OK;
        }
    }
    if (!GROW(rs->patterns, b->patterns_alloc, rs->stats.n_patterns + 1)
        || !GROW(rs->pbytes, b->pbytes_alloc, rs->n_pbytes + len)) {
        return GPU_ERR_NOMEM;
    }
    pt = &rs->patterns[rs->stats.n_patterns];
    memset(pt, 0, sizeof *pt);
    pt->bytes = rs->n_pbytes;
    pt->len = len;
    pt->depth = len < GPU_IDS_AC_MAX_DEPTH ? len : GPU_IDS_AC_MAX_DEPTH;
    pt->nocase = nocase;
    memcpy(rs->pbytes + rs->n_pbytes, bytes, len);
    rs->n_pbytes += len;
    *idp = rs->stats.n_patterns++;
    b->phash[i] = *idp + 1;
    return GPU_OK;
}

/* Rules, contents, ports and patterns into the ruleset's arrays. */
static int
build_rules(struct parser *p, struct builder *b)
{
    struct gpu_ids_ruleset *rs = b->rs;
    size_t n_contents = 0, n_ports = 0, i, j;
    uint8_t lower[IDS_MAX_PATTERN_LEN];
    uint32_t *anchor_of;
    int error;

    for (i = 0; i < p->n_rules; i++) {
        n_contents += p->rules[i].n_contents;
        n_ports += p->rules[i].d.n_src + p->rules[i].d.n_dst;
    }
    for (b->phash_size = 16; b->phash_size < 2 * n_contents + 2;) {
        b->phash_size *= 2;
    }
    b->phash = calloc(b->phash_size, sizeof *b->phash);
    rs->rules = calloc(p->n_rules + 1, sizeof *rs->rules);
    rs->meta = calloc(p->n_rules + 1, sizeof *rs->meta);
    rs->contents = calloc(n_contents + 1, sizeof *rs->contents);
    rs->ports = calloc(n_ports + 1, sizeof *rs->ports);
    anchor_of = calloc(p->n_rules + 1, sizeof *anchor_of);
    if (!b->phash || !rs->rules || !rs->meta || !rs->contents
        || !rs->ports || !anchor_of) {
        free(anchor_of);
        return GPU_ERR_NOMEM;
    }

    for (i = 0; i < p->n_rules; i++) {
        struct lrule *lr = &p->rules[i];
        struct gpu_ids_drule *d = &rs->rules[i];

        *d = lr->d;
        d->content = rs->n_contents;
        d->ports = rs->n_ports;
        if (d->n_src + d->n_dst) {
            memcpy(rs->ports + rs->n_ports, lr->ports,
                   (d->n_src + d->n_dst) * sizeof *rs->ports);
        }
        rs->n_ports += d->n_src + d->n_dst;
        rs->meta[i] = lr->meta;
        lr->meta.msg = NULL;    /* Moved. */

        for (j = 0; j < lr->n_contents; j++) {
            const struct pcontent *c = &lr->contents[j];
            struct gpu_ids_dcontent *dc = &rs->contents[rs->n_contents++];
            const uint8_t *bytes = c->bytes;
            uint32_t k;

            if (c->nocase) {
                for (k = 0; k < c->len; k++) {
                    lower[k] = gpu_ids_lower(c->bytes[k]);
                }
                bytes = lower;
            }
            error = intern_pattern(b, bytes, c->len, c->nocase,
                                   &dc->pattern);
            if (error) {
                free(anchor_of);
                return error;
            }
            if (c->has_distance || c->has_within) {
                dc->flags = GPU_IDS_C_RELATIVE;
                dc->a = c->has_distance ? c->distance : 0;
                if (c->has_within) {
                    dc->flags |= GPU_IDS_C_BOUNDED;
                    dc->b = c->within;
                }
            } else {
                dc->a = c->has_offset ? c->offset : 0;
                if (c->has_depth) {
                    dc->flags |= GPU_IDS_C_BOUNDED;
                    dc->b = c->depth;
                }
            }
            if (c->len > rs->stats.max_pattern_len) {
                rs->stats.max_pattern_len = c->len;
            }
        }
        anchor_of[i] = rs->contents[d->content + lr->meta.anchor].pattern;
        rs->patterns[anchor_of[i]].n_rules++;
    }
    rs->stats.n_contents = rs->n_contents;

    /* anchored[]: rule indexes grouped by anchor pattern. */
    rs->anchored = calloc(p->n_rules + 1, sizeof *rs->anchored);
    if (!rs->anchored) {
        free(anchor_of);
        return GPU_ERR_NOMEM;
    }
    uint32_t at = 0;
    for (i = 0; i < rs->stats.n_patterns; i++) {
        rs->patterns[i].rules = at;
        at += rs->patterns[i].n_rules;
        rs->patterns[i].n_rules = 0;
    }
    for (i = 0; i < p->n_rules; i++) {
        struct gpu_ids_dpattern *pt = &rs->patterns[anchor_of[i]];

        rs->anchored[pt->rules + pt->n_rules++] = i;
    }
    free(anchor_of);
    return GPU_OK;
}

static int
cmp_u32(const void *a_, const void *b_)
{
    uint32_t a = *(const uint32_t *) a_, b = *(const uint32_t *) b_;

    return a < b ? -1 : a > b;
}

/* The Aho-Corasick DFA over the patterns' first 'depth' bytes,
 * lowercased. */
static int
build_automaton(struct parser *p, struct builder *b)
{
    struct gpu_ids_ruleset *rs = b->rs;
    uint32_t np = rs->stats.n_patterns;
    uint8_t used[256] = { 0 };
    uint32_t n_classes = 1, C, n_states = 1, max_states = 1;
    uint32_t *node_first = NULL, *pat_next = NULL, *fail = NULL;
    uint32_t *queue = NULL, *tmp = NULL;
    size_t i, k;
    int error = GPU_ERR_NOMEM;

    /* Alphabet: one class per lowercased byte that occurs in the
     * automaton's part of a pattern; every other byte is class 0. */
    for (i = 0; i < np; i++) {
        const struct gpu_ids_dpattern *pt = &rs->patterns[i];

        for (k = 0; k < pt->depth; k++) {
            used[gpu_ids_lower(rs->pbytes[pt->bytes + k])] = 1;
        }
        max_states += pt->depth;
    }
    for (i = 0; i < 256; i++) {
        if (used[i]) {
            rs->class_map[i] = n_classes++;
        }
    }
    for (i = 0; i < 256; i++) {
        rs->class_map[i] = rs->class_map[gpu_ids_lower(i)];
    }
    C = n_classes;
    if ((uint64_t) max_states * C * sizeof *rs->trans > IDS_MAX_TABLE_BYTES
        || (uint64_t) max_states * C > GPU_IDS_ROW_MASK) {
        snprintf(p->err, p->err_size,
                 "%s: rule set too large: up to %u automaton states of %u "
                 "classes", p->name, max_states, C);
        return GPU_ERR_NOMEM;
    }

    /* The trie, with 0 for "no child" (the root is nobody's child). */
    rs->trans = calloc((size_t) max_states * C, sizeof *rs->trans);
    node_first = malloc(max_states * sizeof *node_first);
    pat_next = malloc((np + 1) * sizeof *pat_next);
    fail = calloc(max_states, sizeof *fail);
    queue = malloc(max_states * sizeof *queue);
    if (!rs->trans || !node_first || !pat_next || !fail || !queue) {
        goto out;
    }
    memset(node_first, 0xff, max_states * sizeof *node_first);
    for (i = 0; i < np; i++) {
        const struct gpu_ids_dpattern *pt = &rs->patterns[i];
        uint32_t s = 0;

        for (k = 0; k < pt->depth; k++) {
            uint32_t *e = &rs->trans[(size_t) s * C
                                     + rs->class_map[rs->pbytes[pt->bytes
                                                                + k]]];
            if (!*e) {
                *e = n_states++;
            }
            s = *e;
        }
        pat_next[i] = node_first[s];
        node_first[s] = i;
        if (k > rs->stats.max_depth) {
            rs->stats.max_depth = k;
        }
    }

    /* Breadth first: failure links, then the missing transitions from
     * the failure state's (already complete) row. */
    uint32_t head = 0, tail = 0;
    for (k = 0; k < C; k++) {
        uint32_t child = rs->trans[k];

        if (child) {
            fail[child] = 0;
            queue[tail++] = child;
        }
    }
    while (head < tail) {
        uint32_t s = queue[head++];
        uint32_t *row = &rs->trans[(size_t) s * C];
        const uint32_t *frow = &rs->trans[(size_t) fail[s] * C];

        for (k = 0; k < C; k++) {
            if (row[k]) {
                fail[row[k]] = frow[k];
                queue[tail++] = row[k];
            } else {
                row[k] = frow[k];
            }
        }
    }

    /* Outputs: a state's own patterns and its failure state's, anchors
     * first so that the kernels can stop at n_anchor. */
    rs->out = calloc(n_states, sizeof *rs->out);
    tmp = malloc((np + 1) * sizeof *tmp);
    if (!rs->out || !tmp) {
        goto out;
    }
    for (head = 0; head <= tail; head++) {
        uint32_t s = head ? queue[head - 1] : 0;
        uint32_t n = 0, na = 0, pid;
        const struct gpu_ids_dout *fo = s ? &rs->out[fail[s]] : NULL;

        for (pid = node_first[s]; pid != UINT32_MAX; pid = pat_next[pid]) {
            tmp[n++] = pid;
        }
        if (fo && fo->n_all) {
            memcpy(tmp + n, rs->out_ids + fo->start,
                   fo->n_all * sizeof *tmp);
            n += fo->n_all;
        }
        /* Anchors first, each group ascending. */
        qsort(tmp, n, sizeof *tmp, cmp_u32);
        if (!GROW(rs->out_ids, b->out_ids_alloc, rs->n_out_ids + n)) {
            goto out;
        }
        rs->out[s].start = rs->n_out_ids;
        for (k = 0; k < n; k++) {
            if (rs->patterns[tmp[k]].n_rules) {
                rs->out_ids[rs->n_out_ids + na++] = tmp[k];
            }
        }
        for (k = 0, i = na; k < n; k++) {
            if (!rs->patterns[tmp[k]].n_rules) {
                rs->out_ids[rs->n_out_ids + i++] = tmp[k];
            }
        }
        rs->out[s].n_anchor = na;
        rs->out[s].n_all = n;
        rs->n_out_ids += n;
    }

    /* Entries become row offsets, flagged when the target ends an
     * anchor. */
    for (i = 0; i < (size_t) n_states * C; i++) {
        uint32_t t = rs->trans[i];

        rs->trans[i] = t * C | (rs->out[t].n_anchor ? GPU_IDS_HIT : 0);
    }
    /* Give back the rows the trie did not need. */
    uint32_t *shrunk = realloc(rs->trans,
                               (size_t) n_states * C * sizeof *rs->trans);
    if (shrunk) {
        rs->trans = shrunk;
    }
    rs->stats.n_states = n_states;
    rs->stats.n_classes = C;
    error = GPU_OK;

out:
    free(node_first);
    free(pat_next);
    free(fail);
    free(queue);
    free(tmp);
    return error;
}

static int
cmp_option_count(const void *a_, const void *b_)
{
    const struct ids_option_count *a = a_, *b = b_;

    if (a->count != b->count) {
        return a->count > b->count ? -1 : 1;
    }
    return strcmp(a->name, b->name);
}

void
gpu_ids_ruleset_destroy(struct gpu_ids_ruleset *rs)
{
    size_t i;

    if (!rs) {
        return;
    }
    free(rs->trans);
    free(rs->out);
    free(rs->out_ids);
    free(rs->patterns);
    free(rs->pbytes);
    free(rs->anchored);
    free(rs->rules);
    if (rs->meta) {
        for (i = 0; i < rs->stats.n_loaded; i++) {
            free(rs->meta[i].msg);
        }
    }
    free(rs->meta);
    free(rs->contents);
    free(rs->ports);
    for (i = 0; i < rs->n_options; i++) {
        free(rs->options[i].name);
    }
    free(rs->options);
    free(rs);
}

static void
parser_free(struct parser *p)
{
    size_t i, j;

    for (i = 0; i < p->n_rules; i++) {
        struct lrule *lr = &p->rules[i];

        for (j = 0; j < lr->n_contents; j++) {
            free(lr->contents[j].bytes);
        }
        free(lr->contents);
        free(lr->ports);
        free(lr->meta.msg);
    }
    free(p->rules);
    for (i = 0; i < p->n_options; i++) {
        free(p->options[i].name);
    }
    free(p->options);
}

int
gpu_ids_compile(const char *text, const char *name,
                const struct gpu_ids_load_options *opts,
                struct gpu_ids_ruleset **rsp, char *err, size_t err_size)
{
    char dummy[1];
    struct parser p;
    struct builder b;
    struct gpu_ids_ruleset *rs;
    int error;

    memset(&p, 0, sizeof p);
    memset(&b, 0, sizeof b);
    if (!err || !err_size) {
        err = dummy;
        err_size = sizeof dummy;
    }
    err[0] = '\0';
    p.name = name ? name : "(rules)";
    p.err = err;
    p.err_size = err_size;
    if (opts) {
        p.opts = *opts;
    }

    error = parse_text(&p, text);
    if (error) {
        if (error == GPU_ERR_NOMEM && !err[0]) {
            snprintf(err, err_size, "%s: out of memory", p.name);
        }
        parser_free(&p);
        return error;
    }

    rs = calloc(1, sizeof *rs);
    if (!rs) {
        parser_free(&p);
        return GPU_ERR_NOMEM;
    }
    rs->stats = p.stats;
    b.rs = rs;
    error = build_rules(&p, &b);
    if (!error) {
        error = build_automaton(&p, &b);
    }
    free(b.phash);
    if (error) {
        if (!err[0]) {
            snprintf(err, err_size, "%s: %s", p.name,
                     gpu_status_string(error));
        }
        /* meta[] msgs were moved out of p; destroy frees them. */
        rs->stats.n_loaded = p.n_rules;
        gpu_ids_ruleset_destroy(rs);
        parser_free(&p);
        return error;
    }

    rs->options = p.options;
    rs->n_options = p.n_options;
    p.options = NULL;
    p.n_options = 0;
    if (rs->n_options) {
        qsort(rs->options, rs->n_options, sizeof *rs->options,
              cmp_option_count);
    }

    rs->view.class_map = rs->class_map;
    rs->view.trans = rs->trans;
    rs->view.out = rs->out;
    rs->view.out_ids = rs->out_ids;
    rs->view.patterns = rs->patterns;
    rs->view.pbytes = rs->pbytes;
    rs->view.anchored = rs->anchored;
    rs->view.rules = rs->rules;
    rs->view.contents = rs->contents;
    rs->view.ports = rs->ports;
    rs->view.n_states = rs->stats.n_states;
    rs->view.n_classes = rs->stats.n_classes;
    rs->view.n_patterns = rs->stats.n_patterns;
    rs->view.n_rules = rs->stats.n_loaded;
    rs->view.max_depth = rs->stats.max_depth;
    rs->stats.table_bytes =
        256 + (uint64_t) rs->stats.n_states * rs->stats.n_classes * 4
        + (uint64_t) rs->stats.n_states * sizeof *rs->out
        + rs->n_out_ids * 4
        + (uint64_t) rs->stats.n_patterns * sizeof *rs->patterns
        + rs->n_pbytes + (uint64_t) rs->stats.n_loaded * 4
        + (uint64_t) rs->stats.n_loaded * sizeof *rs->rules
        + rs->n_contents * sizeof *rs->contents
        + rs->n_ports * sizeof *rs->ports;

    parser_free(&p);
    *rsp = rs;
    return GPU_OK;
}
