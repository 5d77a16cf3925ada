/* ClassBench parsing and range expansion; see classifier-classbench.h. */
#include <config.h>

#include "tests/classifier-classbench.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef OVSGPU_DEFAULT_DATA
#define OVSGPU_DEFAULT_DATA "data"
#endif

const char *
cb_data_dir(void)
{
    const char *env = getenv("OVSGPU_DATA");

    return env && *env ? env : OVSGPU_DEFAULT_DATA;
}

static FILE *
cb_open(const char *path, bool *piped)
{
    size_t len = strlen(path);

    *piped = len > 3 && !strcmp(path + len - 3, ".gz");
    if (*piped) {
        char cmd[4096];
        FILE *probe = fopen(path, "r");

        if (!probe) {
            return NULL;
        }
        fclose(probe);
        /* Paths come from our own configuration, but quote anyway. */
        if (strchr(path, '\'')) {
            errno = EINVAL;
            return NULL;
        }
        snprintf(cmd, sizeof cmd, "gzip -dc '%s'", path);
        return popen(cmd, "r");
    }
    return fopen(path, "r");
}

static void
cb_close(FILE *f, bool piped)
{
    if (piped) {
        pclose(f);
    } else {
        fclose(f);
    }
}

static uint32_t
prefix_mask(unsigned int len)
{
    return len ? UINT32_MAX << (32 - len) : 0;
}

int
cb_load_filters(const char *path, struct cb_filter **filtersp, size_t *np)
{
    struct cb_filter *filters = NULL;
    size_t n = 0, alloc = 0;
    char line[512];
    bool piped;
    FILE *f = cb_open(path, &piped);

    if (!f) {
        return errno ? errno : ENOENT;
    }
    while (fgets(line, sizeof line, f)) {
        unsigned int s[4], d[4], sl, dl, splo, sphi, dplo, dphi, pv, pm;
        struct cb_filter *flt;

        if (sscanf(line, "@%u.%u.%u.%u/%u %u.%u.%u.%u/%u %u : %u %u : %u "
                   "%x/%x", &s[0], &s[1], &s[2], &s[3], &sl, &d[0], &d[1],
                   &d[2], &d[3], &dl, &splo, &sphi, &dplo, &dphi, &pv,
                   &pm) != 16) {
            continue;
        }
        if (n == alloc) {
            alloc = alloc ? 2 * alloc : 1024;
            filters = realloc(filters, alloc * sizeof *filters);
            if (!filters) {
                cb_close(f, piped);
                return ENOMEM;
            }
        }
        flt = &filters[n++];
        flt->src_mask = prefix_mask(sl);
        flt->src = ((s[0] << 24) | (s[1] << 16) | (s[2] << 8) | s[3])
                   & flt->src_mask;
        flt->dst_mask = prefix_mask(dl);
        flt->dst = ((d[0] << 24) | (d[1] << 16) | (d[2] << 8) | d[3])
                   & flt->dst_mask;
        flt->sp_lo = splo;
        flt->sp_hi = sphi;
        flt->dp_lo = dplo;
        flt->dp_hi = dphi;
        flt->proto_mask = pm;
        flt->proto = pv & pm;
    }
    cb_close(f, piped);
    *filtersp = filters;
    *np = n;
    return n ? 0 : EINVAL;
}

int
cb_load_trace(const char *path, struct cb_header **headersp, size_t *np)
{
    struct cb_header *hs = NULL;
    size_t n = 0, alloc = 0;
    char line[256];
    bool piped;
    FILE *f = cb_open(path, &piped);

    if (!f) {
        return errno ? errno : ENOENT;
    }
    while (fgets(line, sizeof line, f)) {
        unsigned long src, dst, sp, dp, proto, flags, ref;

        if (sscanf(line, "%lu %lu %lu %lu %lu %lu %lu", &src, &dst, &sp,
                   &dp, &proto, &flags, &ref) != 7) {
            continue;
        }
        if (n == alloc) {
            alloc = alloc ? 2 * alloc : 4096;
            hs = realloc(hs, alloc * sizeof *hs);
            if (!hs) {
                cb_close(f, piped);
                return ENOMEM;
            }
        }
        hs[n].src = src;
        hs[n].dst = dst;
        hs[n].sp = sp;
        hs[n].dp = dp;
        hs[n].proto = proto;
        hs[n].ref = ref;
        n++;
    }
    cb_close(f, piped);
    *headersp = hs;
    *np = n;
    return n ? 0 : EINVAL;
}

/* Splits [lo, hi] (16-bit) into prefixes: values and masks. */
static size_t
range_to_prefixes(uint32_t lo, uint32_t hi, uint16_t *vals, uint16_t *masks)
{
    size_t n = 0;

    while (lo <= hi) {
        uint32_t size = lo ? (lo & -lo) : 0x10000;

        while (lo + size - 1 > hi) {
            size >>= 1;
        }
        vals[n] = lo;
        masks[n] = (uint16_t) ~(size - 1);
        n++;
        lo += size;
    }
    return n;
}

int
cb_expand(const struct cb_filter *filters, size_t n, struct cb_rule **rulesp,
          size_t *n_rulesp)
{
    struct cb_rule *rules = NULL;
    size_t n_rules = 0, alloc = 0;

    for (size_t i = 0; i < n; i++) {
        const struct cb_filter *f = &filters[i];
        uint16_t sv[32], sm[32], dv[32], dm[32];
        size_t ns = range_to_prefixes(f->sp_lo, f->sp_hi, sv, sm);
        size_t nd = range_to_prefixes(f->dp_lo, f->dp_hi, dv, dm);

        for (size_t a = 0; a < ns; a++) {
            for (size_t b = 0; b < nd; b++) {
                struct cb_rule *r;

                if (n_rules == alloc) {
                    alloc = alloc ? 2 * alloc : 4096;
                    rules = realloc(rules, alloc * sizeof *rules);
                    if (!rules) {
                        return ENOMEM;
                    }
                }
                r = &rules[n_rules++];
                r->value[0] = ((uint64_t) f->src << 32) | f->dst;
                r->mask[0] = ((uint64_t) f->src_mask << 32) | f->dst_mask;
                r->value[1] = ((uint64_t) sv[a] << 48)
                              | ((uint64_t) dv[b] << 32)
                              | ((uint64_t) f->proto << 24);
                r->mask[1] = ((uint64_t) sm[a] << 48)
                             | ((uint64_t) dm[b] << 32)
                             | ((uint64_t) f->proto_mask << 24);
                r->filter = i;
            }
        }
    }
    *rulesp = rules;
    *n_rulesp = n_rules;
    return 0;
}

void
cb_key(const struct cb_header *h, uint64_t key[CB_KEY_WORDS])
{
    key[0] = ((uint64_t) h->src << 32) | h->dst;
    key[1] = ((uint64_t) h->sp << 48) | ((uint64_t) h->dp << 32)
             | ((uint64_t) h->proto << 24);
}

bool
cb_match(const struct cb_filter *f, const struct cb_header *h)
{
    return (h->src & f->src_mask) == f->src
           && (h->dst & f->dst_mask) == f->dst
           && h->sp >= f->sp_lo && h->sp <= f->sp_hi
           && h->dp >= f->dp_lo && h->dp <= f->dp_hi
           && (h->proto & f->proto_mask) == f->proto;
}

size_t
cb_first_match(const struct cb_filter *filters, size_t n,
               const struct cb_header *h)
{
    for (size_t i = 0; i < n; i++) {
        if (cb_match(&filters[i], h)) {
            return i;
        }
    }
    return SIZE_MAX;
}
