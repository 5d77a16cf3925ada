/*
 * Per-element logic of the classifier, written once for the CPU backend
 * (C) and the CUDA kernels (nvcc): hashing a masked key, cuckoo slot
 * indexes, Bloom filter bit positions, and one class's search.  Both
 * backends must agree bit for bit on where a rule lives, since the host
 * builds the tables that the device reads, so nothing here may differ
 * between the two compilers.
 *
 * Storage of one class (the same bytes on the host and on the device):
 *
 *     u64 mask[W]
 *     u32 filter[1 << log2_fw]         Bloom filter, 2 bits per rule, both
 *                                      in one 32-bit word (one load).
 *     u64 slots[3 << log2_d][W + 1]    3 cuckoo subtables of d slots each:
 *                                      word 0 is priority << 32 | handle
 *                                      (all ones when empty), words 1..W
 *                                      the masked value.
 */
#ifndef GPU_CLASSIFIER_INLINE_H
#define GPU_CLASSIFIER_INLINE_H 1

#include <stdint.h>
#include <stddef.h>

#ifdef __CUDACC__
#define GPU_CLS_HD static __host__ __device__ __forceinline__
#else
#define GPU_CLS_HD static inline
#endif

/* Loops over key words must unroll in the kernels, where the width is a
 * template constant, or the key array a thread holds goes to local
 * memory instead of registers.  Only nvcc's device pass knows the pragma
 * (the host compiler would warn). */
#ifdef __CUDA_ARCH__
#define GPU_CLS_UNROLL _Pragma("unroll")
#else
#define GPU_CLS_UNROLL
#endif

#define GPU_CLS_SUBTABLES 3
#define GPU_CLS_EMPTY_SLOT UINT64_MAX
/* Cuckoo indexes come from three 20-bit fields of one 64-bit hash. */
#define GPU_CLS_MAX_LOG2_D 20
/* Filter words per subtable slot: 4 words per 3 slots is ~43 bits per
 * slot, ~48 bits per rule at 90% load, a false-positive rate of about
 * 2e-3 for k = 2 bits in one word (GSwitch used 2 KB for 282 rules,
 * 1e-3). */
#define GPU_CLS_FILTER_WORDS_LOG2_PER_D 2

/* What a lookup needs to know about one class.  The same struct describes
 * host memory (CPU backend) and device memory (CUDA backend). */
struct gpu_cls_dclass {
    const uint64_t *mask;
    const uint32_t *filter;
    const uint64_t *slots;
    uint32_t log2_d;            /* Slots per subtable: 1 << log2_d. */
    uint32_t log2_fw;           /* Filter words: 1 << log2_fw. */
    uint32_t seed;              /* Hash seed; changed by a rebuild. */
    uint32_t n_rules;           /* 0: skip the class. */
    uint32_t max_priority;      /* Highest priority in the class. */
    uint32_t pad;
};

GPU_CLS_HD uint64_t
gpu_cls_rotl64(uint64_t x, unsigned int r)
{
    return (x << r) | (x >> (64 - r));
}

/* Hash of 'key' & 'mask'.  A multiply and a rotate per word, then a
 * finalizer so that every output bit depends on every input bit: the
 * cuckoo indexes and filter bits are all cut from this one value. */
GPU_CLS_HD uint64_t
gpu_cls_hash(const uint64_t *key, const uint64_t *mask, unsigned int n_words,
             uint32_t seed)
{
    uint64_t h = (seed + 1) * 0x9e3779b97f4a7c15ULL;
    unsigned int i;

    GPU_CLS_UNROLL
    for (i = 0; i < n_words; i++) {
        h = gpu_cls_rotl64((h ^ (key[i] & mask[i])) * 0xff51afd7ed558ccdULL,
                           29);
    }
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

/* Slot index (over all three subtables) of subtable 'i' for hash 'h'. */
GPU_CLS_HD uint32_t
gpu_cls_cuckoo_index(uint64_t h, unsigned int i, uint32_t log2_d)
{
    uint32_t d_mask = (1u << log2_d) - 1;

    return ((uint32_t) (h >> (20 * i)) & d_mask) + (i << log2_d);
}

/* Bloom filter word for 'h'.  Multiply-shift (as GSwitch) so the top bits,
 * the well-mixed ones, pick the word; the 10 bits below them pick the two
 * bits within it. */
GPU_CLS_HD uint32_t
gpu_cls_bloom_word(uint64_t h, uint32_t log2_fw)
{
    uint64_t g = h * 0x9e3779b97f4a7c15ULL;

    return log2_fw ? (uint32_t) (g >> (64 - log2_fw)) : 0;
}

GPU_CLS_HD uint32_t
gpu_cls_bloom_bits(uint64_t h, uint32_t log2_fw)
{
    uint64_t g = h * 0x9e3779b97f4a7c15ULL;
    uint32_t b1 = (uint32_t) (g >> (54 - log2_fw)) & 31;
    uint32_t b2 = (uint32_t) (g >> (59 - log2_fw)) & 31;

    return (1u << b1) | (1u << b2);
}

GPU_CLS_HD int
gpu_cls_slot_matches(const uint64_t *slot, const uint64_t *key,
                     const uint64_t *mask, unsigned int n_words)
{
    unsigned int i;

    if (slot[0] == GPU_CLS_EMPTY_SLOT) {
        return 0;
    }
    GPU_CLS_UNROLL
    for (i = 0; i < n_words; i++) {
        if (slot[1 + i] != (key[i] & mask[i])) {
            return 0;
        }
    }
    return 1;
}

/* The slot of the class's rule that matches 'key' with hash 'h', or NULL.
 * A key matches at most one rule of a class (rules of a class differ in
 * their masked values), so the first hit is the answer. */
GPU_CLS_HD const uint64_t *
gpu_cls_probe(const uint64_t *slots, uint32_t log2_d, const uint64_t *key,
              const uint64_t *mask, unsigned int n_words, uint64_t h)
{
    unsigned int i;

    GPU_CLS_UNROLL
    for (i = 0; i < GPU_CLS_SUBTABLES; i++) {
        const uint64_t *slot = slots + (size_t) gpu_cls_cuckoo_index(
            h, i, log2_d) * (n_words + 1);

        if (gpu_cls_slot_matches(slot, key, mask, n_words)) {
            return slot;
        }
    }
    return NULL;
}

/* Linear search of one class: every slot, no hashing.  Cheapest when the
 * table holds only a few rules. */
GPU_CLS_HD const uint64_t *
gpu_cls_scan(const uint64_t *slots, uint32_t log2_d, const uint64_t *key,
             const uint64_t *mask, unsigned int n_words)
{
    uint32_t n = GPU_CLS_SUBTABLES << log2_d;
    uint32_t i;

    for (i = 0; i < n; i++) {
        const uint64_t *slot = slots + (size_t) i * (n_words + 1);

        if (gpu_cls_slot_matches(slot, key, mask, n_words)) {
            return slot;
        }
    }
    return NULL;
}

GPU_CLS_HD int
gpu_cls_bloom_test(const uint32_t *filter, uint32_t log2_fw, uint64_t h)
{
    uint32_t bits = gpu_cls_bloom_bits(h, log2_fw);

    return (filter[gpu_cls_bloom_word(h, log2_fw)] & bits) == bits;
}

/* Algorithms as the lookup code sees them (no AUTO: that is resolved
 * before a batch starts). */
enum {
    GPU_CLS_ALG_LINEAR = 1,
    GPU_CLS_ALG_TUPLE = 2,
    GPU_CLS_ALG_BLOOM = 3,
};

/* Searches one class for 'key'.  'mask' and 'filter' are passed apart from
 * 'c' so that a kernel can hand in copies in shared memory. */
GPU_CLS_HD const uint64_t *
gpu_cls_class_search(const struct gpu_cls_dclass *c, const uint64_t *mask,
                     const uint32_t *filter, const uint64_t *key,
                     unsigned int n_words, int alg)
{
    uint64_t h;

    if (alg == GPU_CLS_ALG_LINEAR) {
        return gpu_cls_scan(c->slots, c->log2_d, key, mask, n_words);
    }
    h = gpu_cls_hash(key, mask, n_words, c->seed);
    if (alg == GPU_CLS_ALG_BLOOM && !gpu_cls_bloom_test(filter, c->log2_fw,
                                                        h)) {
        return NULL;
    }
    return gpu_cls_probe(c->slots, c->log2_d, key, mask, n_words, h);
}

/* Highest-priority ordering as one integer: a larger value wins.  Ties in
 * priority go to the lower handle.  0 means "nothing yet" (the handle
 * GPU_CLS_NO_MATCH is never stored). */
GPU_CLS_HD uint64_t
gpu_cls_rank(uint64_t slot_word0)
{
    uint32_t handle = (uint32_t) slot_word0;
    uint32_t priority = (uint32_t) (slot_word0 >> 32);

    return ((uint64_t) priority << 32) | (uint32_t) ~handle;
}

GPU_CLS_HD uint32_t
gpu_cls_rank_handle(uint64_t rank)
{
    return rank ? ~(uint32_t) rank : UINT32_MAX;
}

#endif /* classifier-inline.h */
