/*
 * ClassBench filter sets and header traces for the classifier's tests and
 * benchmark.
 *
 * Facts about the files in data/classbench that this code relies
 * on, checked by brute force against the 10K sets and their traces:
 *
 *   - A trace line's last number is the 0-based index of the filter the
 *     header was drawn from (the data README says 1-based; with 1-based
 *     indexes most headers match no filter at all).
 *   - The trace's flags column does not follow the filters' flags/mask
 *     (e.g. 0x2001200 against 0x0200/0x1200), so classification is on the
 *     5-tuple only, as GSwitch and most ClassBench users do.  With flags
 *     left out every header matches its own filter.
 *
 * Keys are 2 u64 words: word 0 = src << 32 | dst; word 1 = sport << 48 |
 * dport << 32 | proto << 24.
 */
#ifndef CLASSIFIER_CLASSBENCH_H
#define CLASSIFIER_CLASSBENCH_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CB_KEY_WORDS 2

struct cb_filter {
    uint32_t src, src_mask, dst, dst_mask;
    uint16_t sp_lo, sp_hi, dp_lo, dp_hi;
    uint8_t proto, proto_mask;
};

struct cb_header {
    uint32_t src, dst;
    uint16_t sp, dp;
    uint8_t proto;
    uint32_t ref;               /* 0-based filter index. */
};

/* A filter expanded to masked rules (port ranges to prefixes). */
struct cb_rule {
    uint64_t value[CB_KEY_WORDS];
    uint64_t mask[CB_KEY_WORDS];
    uint32_t filter;            /* Index of the filter it came from. */
};

/* The folder with the test data: $OVSGPU_DATA, else the build tree's
 * data/ (OVSGPU_DEFAULT_DATA, made by "make" from the repository's). */
const char *cb_data_dir(void);

/* Reads 'path' (gzip'd if it ends in .gz).  Returns 0 or an errno value;
 * '*filters' is malloc'd. */
int cb_load_filters(const char *path, struct cb_filter **filters,
                    size_t *n);
int cb_load_trace(const char *path, struct cb_header **headers, size_t *n);

/* Expands 'n' filters into malloc'd '*rules'. */
int cb_expand(const struct cb_filter *filters, size_t n,
              struct cb_rule **rules, size_t *n_rules);

void cb_key(const struct cb_header *, uint64_t key[CB_KEY_WORDS]);
bool cb_match(const struct cb_filter *, const struct cb_header *);

/* Index of the first (highest-priority) filter matching 'h', or SIZE_MAX. */
size_t cb_first_match(const struct cb_filter *, size_t n,
                      const struct cb_header *h);

#endif /* classifier-classbench.h */
