/*
 * OVS 3.1's own megaflow classifier (dpif-netdev's dpcls) as a peer in
 * classifier-bench: the same rules and keys, looked up by OVS's code
 * (patches/0005 exports a dpcls that lives outside a PMD thread).
 *
 * This header carries no OVS type, so that classifier-bench.c is built
 * with ovs-gpu's config.h while the peer is built with OVS's.
 *
 * A dense key of 'n_words' u64 words is laid into a miniflow: word i goes
 * to one struct flow u64 word (the ones an IPv4 5-tuple megaflow uses
 * first, see ovs-dpcls-peer.c), so subtables get the unit bit counts, and
 * therefore the specialized lookup functions, that real megaflows get.
 * Only the nonzero words of a rule's mask enter its subtable's mask, as in
 * dp_netdev_flow_add().
 */
#ifndef OVS_DPCLS_PEER_H
#define OVS_DPCLS_PEER_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OVS_DPCLS_PEER_NO_MATCH UINT32_MAX

struct ovs_dpcls_peer;

/* True if OVS's AVX-512 subtable lookup was built in and this CPU runs it.
 * It is off by default in OVS 3.1 (priority 0); OVS's default choice is
 * "generic" (with its specialized variants per unit bit counts). */
bool ovs_dpcls_peer_avx512_available(void);

/* Creates an empty dpcls for keys of 'n_words' words (1..84).  With
 * 'avx512', subtables created while building prefer avx512_gather, as
 * "ovs-appctl dpif-netdev/subtable-lookup-prio-set avx512_gather 5"
 * would make them. */
struct ovs_dpcls_peer *ovs_dpcls_peer_create(unsigned int n_words,
                                             bool avx512);
void ovs_dpcls_peer_destroy(struct ovs_dpcls_peer *);

/* Inserts a rule; 'id' is what lookups return for it.  The caller must
 * not insert two rules with the same masked value and mask. */
void ovs_dpcls_peer_insert(struct ovs_dpcls_peer *, const uint64_t *value,
                           const uint64_t *mask, uint32_t id);

/* Ends the build: from here on subtables keep the lookup function they
 * were given.  Call once, after the last insert. */
void ovs_dpcls_peer_finish(struct ovs_dpcls_peer *);

/* Lays 'n_keys' dense keys out as OVS's netdev_flow_keys, once, so that
 * lookups measure the classifier and not the conversion (in the datapath
 * miniflow_extract() builds them). */
void ovs_dpcls_peer_set_keys(struct ovs_dpcls_peer *, const uint64_t *keys,
                             size_t n_keys);

/* Looks up keys [first, first + n) of those set, in bursts of 32 as the
 * datapath does (NETDEV_MAX_BURST), writing each matching rule's id or
 * OVS_DPCLS_PEER_NO_MATCH to 'results'.  Adds to '*probes', if nonnull,
 * the subtables searched per matched key as OVS counts them. */
void ovs_dpcls_peer_lookup(struct ovs_dpcls_peer *, size_t first, size_t n,
                           uint32_t *results, uint64_t *probes);

size_t ovs_dpcls_peer_n_subtables(const struct ovs_dpcls_peer *);

/* Writes the subtable lookup functions in use, e.g. "generic x352". */
void ovs_dpcls_peer_describe(const struct ovs_dpcls_peer *, char *buf,
                             size_t size);

#endif /* ovs-dpcls-peer.h */
