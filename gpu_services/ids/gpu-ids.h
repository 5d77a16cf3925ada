/*
 * ovs-gpu IDS: signature matching of packet payloads against Snort/Suricata
 * content rules, in batches, on the CPU or on a CUDA GPU.
 *
 * The library knows nothing of Open vSwitch.  A ruleset is parsed from a
 * rule file and compiled once into one Aho-Corasick automaton over every
 * content pattern (lowercased alphabet; see docs/IDS-NOTES.md).  A matcher
 * puts a ruleset on a backend; batches of packets are matched through it
 * and each packet gets a verdict: the lowest matching sid and how many
 * rules matched.
 *
 * Rules
 * -----
 *
 *   action proto src_addr src_port dir dst_addr dst_port (options)
 *
 * - action: alert, log, drop, reject, sdrop.  pass, activate and dynamic
 *   rules are skipped (GPU_IDS_SKIP_ACTION).
 * - proto: tcp, udp, icmp or ip (any).  Anything else (Suricata's
 *   application protocols) is skipped (GPU_IDS_SKIP_PROTOCOL).
 * - addresses: a batch carries no addresses, so "any" and variables
 *   ($HOME_NET, ...) are treated as any.  A literal address or list cannot
 *   be honoured (GPU_IDS_SKIP_ADDRESS, or any with partial loading).
 * - ports: any, N, N:M, N:, :M, [list], !negation, nested lists, and the
 *   variables below.  Unknown port variables are treated as any and
 *   counted (gpu_ids_ruleset_stats.n_unknown_vars).
 * - dir: -> or <> (either direction).
 * - options honoured: content (with |hex| bytes, \" \; \\ escapes),
 *   nocase, offset, depth, distance, within, rawbytes, fast_pattern (the
 *   content that feeds the automaton), pkt_data; msg, sid; rev, gid,
 *   classtype, reference, metadata, priority are accepted and ignored.
 * - Anything else (pcre, flow, flowbits, byte_test, http_uri, file_data,
 *   negated content, ...) cannot be honoured on a per-packet payload scan.
 *   The rule is skipped (GPU_IDS_SKIP_OPTION, with per-option counts)
 *   unless partial loading is asked for, in which case it is loaded on its
 *   content matches alone: negated contents are dropped, and contents
 *   bound to another buffer (http_*, file_data, ...) keep their bytes but
 *   lose their position modifiers.
 *
 * Content semantics (as Snort and Suricata): with 'len' the content's
 * length and 'end' the end of the previous content's match (0 for the
 * first content), a content matches at start 's' when
 *
 *   absolute:  s >= offset and s + len <= offset + depth (depth if set)
 *   relative:  s >= end + distance and s + len <= end + distance + within
 *              (within if set)
 *
 * and a rule matches when some choice of match positions satisfies all of
 * its contents in order, and the packet's protocol and ports match its
 * header (either direction for <>).
 *
 * Built-in port variables (Snort 2.9's snort.conf defaults):
 *
 *   HTTP_PORTS       80 81 311 383 591 593 901 1220 1414 1741 1830 2301
 *                    2381 2809 3037 3128 3702 4343 4848 5250 6988 7000
 *                    7001 7144 7145 7510 7777 7779 8000 8008 8014 8028
 *                    8080 8085 8088 8090 8118 8123 8180 8181 8243 8280
 *                    8300 8800 8888 8899 9000 9060 9080 9090 9091 9443
 *                    9999 11371 34443 34444 41080 50002 55555
 *   SHELLCODE_PORTS  !80
 *   ORACLE_PORTS     1024:
 *   SSH_PORTS        22
 *   FTP_PORTS        21 2100 3535
 *   SIP_PORTS        5060 5061 5600
 *   FILE_DATA_PORTS  $HTTP_PORTS 110 143
 *   GTP_PORTS        2123 2152 3386
 *
 * Concurrency: a ruleset is immutable once loaded and may be shared by
 * any number of matchers and threads.  A matcher may be used by many
 * threads, each through its own batch.  A batch is used by one thread at
 * a time.  Reloading means loading a new ruleset and matcher and
 * switching to them; a failed load leaves nothing behind, so the caller
 * keeps its old ones.
 */
#ifndef GPU_IDS_H
#define GPU_IDS_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu_runtime/gpu-runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The automaton holds at most this many leading bytes of each pattern;
 * hits are confirmed against the whole pattern.  It bounds the overlap
 * between chunks of a long packet scanned by different GPU threads. */
#ifndef GPU_IDS_AC_MAX_DEPTH
#define GPU_IDS_AC_MAX_DEPTH 32
#endif

/* Most contents in one rule; rules with more are skipped
 * (GPU_IDS_SKIP_TOO_MANY). */
#define GPU_IDS_MAX_CONTENTS 16

#define GPU_IDS_NO_RULE UINT32_MAX

/* The largest batch one struct gpu_ids_batch accepts. */
#define GPU_IDS_MAX_BATCH_PACKETS (1u << 22)
#define GPU_IDS_MAX_BATCH_BYTES (1u << 31)

/* ---- Rulesets. ---- */

struct gpu_ids_load_options {
    /* Load rules with options that cannot be honoured on their contents
     * alone (see above), instead of skipping them. */
    bool partial;

    /* Also load rules commented out with a leading '#' (Snort's
     * community.rules ships most rules that way).  Commented lines that do
     * not parse as rules are comments and are not counted. */
    bool commented;
};

enum gpu_ids_skip_reason {
    GPU_IDS_SKIP_ACTION,        /* pass, activate, dynamic. */
    GPU_IDS_SKIP_PROTOCOL,      /* Not tcp, udp, icmp or ip. */
    GPU_IDS_SKIP_NO_CONTENT,    /* No content to match the payload on. */
    GPU_IDS_SKIP_TOO_MANY,      /* More than GPU_IDS_MAX_CONTENTS. */
    GPU_IDS_SKIP_OPTION,        /* An option that cannot be honoured. */
    GPU_IDS_SKIP_ADDRESS,       /* A literal address. */
    GPU_IDS_SKIP_N_REASONS
};

const char *gpu_ids_skip_reason_name(enum gpu_ids_skip_reason);

struct gpu_ids_ruleset_stats {
    uint32_t n_lines;           /* Lines read (continuations joined). */
    uint32_t n_rules;           /* Rule lines seen (and parsed). */
    uint32_t n_loaded;          /* Rules in the ruleset... */
    uint32_t n_partial;         /* ...of which loaded on contents alone. */
    uint32_t n_skipped;         /* n_rules - n_loaded. */
    uint32_t n_skipped_by[GPU_IDS_SKIP_N_REASONS];
    uint32_t n_unknown_vars;    /* Port variables treated as any. */

    /* The compiled automaton. */
    uint32_t n_contents;        /* Over all loaded rules. */
    uint32_t n_patterns;        /* Distinct (bytes, nocase) contents. */
    uint32_t n_states;
    uint32_t n_classes;         /* Byte classes of the alphabet. */
    uint32_t max_pattern_len;
    uint32_t max_depth;         /* Deepest automaton state. */
    uint64_t table_bytes;       /* Everything a matcher copies. */
};

struct gpu_ids_ruleset;

/* Parses and compiles the rule file 'path' (or the text 'text', named
 * 'name' in messages).  'opts' may be NULL (strict, no commented rules).
 * Returns GPU_OK and '*rsp', or an error and a message in 'err' (which
 * names the file and line of a malformed rule) with '*rsp' untouched:
 * GPU_ERR_NOT_FOUND (cannot open), GPU_ERR_INVALID (malformed),
 * GPU_ERR_NOMEM. */
int gpu_ids_ruleset_load_file(const char *path,
                              const struct gpu_ids_load_options *opts,
                              struct gpu_ids_ruleset **rsp,
                              char *err, size_t err_size);
int gpu_ids_ruleset_load_string(const char *text, const char *name,
                                const struct gpu_ids_load_options *opts,
                                struct gpu_ids_ruleset **rsp,
                                char *err, size_t err_size);
void gpu_ids_ruleset_destroy(struct gpu_ids_ruleset *);

void gpu_ids_ruleset_get_stats(const struct gpu_ids_ruleset *,
                               struct gpu_ids_ruleset_stats *);

/* The 'i'th option name that made rules unsupported, and in how many
 * rules it appeared (each rule counts an option once), for i in
 * 0..n-1; returns n.  Sorted by count, highest first. */
size_t gpu_ids_ruleset_option_counts(const struct gpu_ids_ruleset *,
                                     size_t i, const char **name,
                                     uint32_t *count);

/* One loaded rule, for display and for tests. */
struct gpu_ids_content_info {
    const uint8_t *bytes;       /* As written (not lowercased). */
    uint32_t len;
    bool nocase;
    bool relative;              /* distance or within given. */
    bool has_depth, has_within;
    int32_t offset, depth;      /* Absolute contents. */
    int32_t distance, within;   /* Relative contents. */
};

enum gpu_ids_proto {
    GPU_IDS_PROTO_IP = 0,       /* Any protocol. */
    GPU_IDS_PROTO_ICMP = 1,
    GPU_IDS_PROTO_TCP = 6,
    GPU_IDS_PROTO_UDP = 17,
};

struct gpu_ids_rule_info {
    uint32_t sid;
    uint32_t line;              /* Line in the rule file. */
    const char *msg;            /* "" if none. */
    const char *action;
    uint8_t proto;              /* enum gpu_ids_proto. */
    bool bidirectional;
    bool partial;               /* Loaded on contents alone. */
    uint32_t n_contents;
    uint32_t anchor;            /* Index of the content in the automaton. */
};

uint32_t gpu_ids_ruleset_n_rules(const struct gpu_ids_ruleset *);
/* Rule 'idx' (0 .. n_rules-1, in file order), or false. */
bool gpu_ids_rule_get(const struct gpu_ids_ruleset *, uint32_t idx,
                      struct gpu_ids_rule_info *);
bool gpu_ids_rule_content(const struct gpu_ids_ruleset *, uint32_t idx,
                          uint32_t content,
                          struct gpu_ids_content_info *);
/* Index of the first loaded rule with 'sid', or GPU_IDS_NO_RULE. */
uint32_t gpu_ids_rule_find(const struct gpu_ids_ruleset *, uint32_t sid);
/* True if a packet with this protocol and ports passes rule 'idx''s
 * header (tests use it to build their reference). */
bool gpu_ids_rule_header_matches(const struct gpu_ids_ruleset *,
                                 uint32_t idx, uint8_t proto,
                                 uint16_t sport, uint16_t dport);

/* Patterns: the distinct contents, as the automaton knows them. */
uint32_t gpu_ids_ruleset_n_patterns(const struct gpu_ids_ruleset *);
bool gpu_ids_pattern_get(const struct gpu_ids_ruleset *, uint32_t idx,
                         const uint8_t **bytes, uint32_t *len,
                         bool *nocase);

/* Exact pattern scan on the CPU: the distinct patterns that occur in
 * 'data' (anywhere, whatever the rules' positions), ascending, in
 * 'ids[0 .. min(n, max_ids))'.  Returns n.  For oracles and tests. */
size_t gpu_ids_scan_patterns(const struct gpu_ids_ruleset *,
                             const uint8_t *data, size_t len,
                             uint32_t *ids, size_t max_ids);

/* ---- Matching. ---- */

enum gpu_ids_backend {
    GPU_IDS_BACKEND_DEFAULT,    /* CUDA if a device is usable, else CPU. */
    GPU_IDS_BACKEND_CPU,
    GPU_IDS_BACKEND_CUDA,
};

struct gpu_ids_matcher_config {
    enum gpu_ids_backend backend;
    int device;                 /* CUDA device index. */

    /* CUDA: scan fixed-size chunks of the packed batch, one per thread
     * (thread-data remapping), rather than one packet per thread. */
    bool remap;
    uint32_t chunk_bytes;       /* 0: default (64). */

    /* CUDA: time the scan and check kernels of every batch (events on
     * the stream; see gpu_ids_matcher_stats). */
    bool profile;

    /* CUDA: queue a submission from the batch's own buffers kernel by
     * kernel (7 runtime calls) rather than as the batch's graph (2), as
     * submissions from the caller's buffers and with 'profile' are
     * always queued.  For comparisons and tests. */
    bool kernel_by_kernel;

    /* CUDA: rather than launch the batch's graph itself (one runtime
     * call, ~2 us of the submitting thread's time), the thread rings a
     * scheduler kernel that launches it from the device (gpu-runtime.h,
     * "Device launch"; at most GPU_GRAPH_MAX_SCHEDULERS batches of a
     * process get one, the others launch from the host).  Off by
     * default here, since its scheduler makes calls that synchronize
     * the device wait up to GPU_GRAPH_LIFE_NS; the switch's rulesets
     * turn it on (launch=device, their default: 30-70 ns a packet less
     * for drop mode's PMD, docs/PERFORMANCE.md, twenty-fourth
     * session). */
    bool device_launch;
};

void gpu_ids_matcher_config_init(struct gpu_ids_matcher_config *);

/* Per-packet header fields a rule header is matched against.
 *
 * A packet may instead be given whole, as the Ethernet frame it came in
 * (GPU_IDS_HDR_FRAME in 'flags', the rest of the header ignored): the
 * matcher finds its IP payload and header fields itself, with the parse
 * the switch's services use (gpu_frame_parse(), gpu_runtime/gpu-frame.h),
 * on the device on CUDA, so that the thread submitting it parses nothing.
 * Its verdict then says whether it was an IP packet and how many payload
 * bytes were scanned; a frame that is not IP (or is a later fragment)
 * has nothing scanned and matches no rule. */
struct gpu_ids_pkt_hdr {
    uint8_t proto;              /* IP protocol: 6 tcp, 17 udp, 1 icmp. */
    uint8_t flags;              /* GPU_IDS_HDR_*: 0 for a payload. */
    uint16_t sport, dport;      /* Host byte order. */
    uint16_t payload_len;       /* Library's: a parsed frame's payload. */
};

/* The packet's data is its whole Ethernet frame (see above). */
#define GPU_IDS_HDR_FRAME 0x01
/* The matcher's, where it parsed a frame: it is an IPv4 or IPv6 packet
 * (not a later fragment)... */
#define GPU_IDS_HDR_IP 0x02
/* ...and the header and data are those it found in it. */
#define GPU_IDS_HDR_PARSED 0x04

struct gpu_ids_verdict {
    uint32_t sid;               /* Lowest matching sid, 0 if none. */
    uint32_t rule;              /* Its rule index, or GPU_IDS_NO_RULE. */
    uint32_t n_matches;         /* Rules that matched. */
    /* For a packet given as a frame: GPU_IDS_HDR_PARSED, GPU_IDS_HDR_IP
     * too if it was IP, and its payload's length (the bytes scanned).  0
     * for a payload. */
    uint8_t flags;
    uint8_t pad;
    uint16_t payload_len;
};

struct gpu_ids_matcher;
struct gpu_ids_batch;

/* Puts 'rs' on a backend (copies its tables to the device).  'rs' must
 * outlive the matcher.  Returns GPU_OK, GPU_ERR_INVALID,
 * GPU_ERR_NO_DEVICE (CUDA asked for but not usable), GPU_ERR_NOMEM,
 * GPU_ERR_DEVICE_NOMEM or GPU_ERR_DEVICE. */
int gpu_ids_matcher_create(const struct gpu_ids_ruleset *rs,
                           const struct gpu_ids_matcher_config *,
                           struct gpu_ids_matcher **);
void gpu_ids_matcher_destroy(struct gpu_ids_matcher *);
enum gpu_ids_backend gpu_ids_matcher_backend(const struct gpu_ids_matcher *);
const char *gpu_ids_backend_name(enum gpu_ids_backend);

/* A batch: buffers for up to 'max_packets' packets and 'max_bytes'
 * payload bytes, and the state of one submission. */
int gpu_ids_batch_create(struct gpu_ids_matcher *, size_t max_packets,
                         size_t max_bytes, struct gpu_ids_batch **);
void gpu_ids_batch_destroy(struct gpu_ids_batch *);

/* Host buffers that 'b' owns, for a submission of up to its 'max_packets'
 * packets and 'max_bytes' bytes, allocated at the first call (pinned on
 * the CUDA backend) and freed with the batch.  A submission whose data,
 * offsets, hdrs and verdicts are these (with offsets[0] == 0) is moved to
 * the device in one copy (unless it uses a small part of a batch sized
 * for many more packets) and its verdicts back in one, where buffers of
 * the caller's take three copies in and two out: each copy costs the
 * submitting thread microseconds (docs/ARCHITECTURE.md, "Runtime calls
 * per submission").  Returns GPU_OK or GPU_ERR_NOMEM. */
struct gpu_ids_batch_buffers {
    uint8_t *data;                      /* 'max_bytes'. */
    uint32_t *offsets;                  /* 'max_packets' + 1. */
    struct gpu_ids_pkt_hdr *hdrs;       /* 'max_packets'. */
    struct gpu_ids_verdict *verdicts;   /* 'max_packets'. */
};
int gpu_ids_batch_buffers(struct gpu_ids_batch *,
                          struct gpu_ids_batch_buffers *);

/* Submits 'n_packets' packets.  Their payloads are packed back to back in
 * 'data': packet i is data[offsets[i] .. offsets[i + 1]), so 'offsets'
 * has n_packets + 1 non-decreasing entries and offsets[n_packets] bytes
 * of 'data' are read.  'hdrs[i]' is packet i's header.  Verdicts land in
 * 'verdicts[0 .. n_packets)' once gpu_ids_wait() or gpu_ids_poll()
 * returns GPU_OK; until then no buffer may be touched.
 *
 * On the CUDA backend the work is queued on 'stream' (NULL: the calling
 * thread's per-thread stream) and this returns at once; buffers should
 * come from gpu_host_alloc() so the copies are asynchronous.  If the
 * device fails or its hit buffer overflows, gpu_ids_wait() matches the
 * batch on the CPU instead (counted in the stats).  On the CPU backend
 * the match runs here.
 *
 * Returns GPU_OK, GPU_ERR_INVALID (too many packets or bytes, bad
 * offsets, null buffers), GPU_ERR_BUSY (previous submission not waited
 * for), GPU_ERR_DEVICE*. */
int gpu_ids_submit(struct gpu_ids_batch *, struct gpu_stream *,
                   const uint8_t *data, const uint32_t *offsets,
                   const struct gpu_ids_pkt_hdr *hdrs, size_t n_packets,
                   struct gpu_ids_verdict *verdicts);

/* The same, but the payload of each packet i whose 'srcs[i]' is not NULL
 * is read where it is, offsets[i + 1] - offsets[i] bytes at 'srcs[i]',
 * and data[offsets[i] .. offsets[i + 1]) is not read: the caller need not
 * copy it.  On the CUDA backend such payloads must lie in memory
 * registered with gpu_host_register() (gpu_host_readable_in_place()),
 * which a kernel reads over the bus, or the batch is matched on the CPU
 * (counted as a device fallback); on the CPU backend anywhere.  They must not
 * change until the submission completes, nor may 'srcs'.  'srcs' NULL is
 * gpu_ids_submit().  The verdicts are those of the same payloads
 * copied. */
int gpu_ids_submit_in_place(struct gpu_ids_batch *, struct gpu_stream *,
                            const uint8_t *data, const uint32_t *offsets,
                            const uint8_t *const *srcs,
                            const struct gpu_ids_pkt_hdr *hdrs,
                            size_t n_packets,
                            struct gpu_ids_verdict *verdicts);

/* Runs the last submission's match again on the data already on the
 * device, without copying anything in or the verdicts out: kernel-only
 * timing.  The verdicts of the re-run stay on the device.  On the CPU
 * backend it matches again from the same host buffers.  GPU_ERR_INVALID
 * after a submission with frames (GPU_IDS_HDR_FRAME), whose payloads
 * the device moved. */
int gpu_ids_resubmit(struct gpu_ids_batch *, struct gpu_stream *);

/* GPU_OK if the last submission is complete (or there was none),
 * GPU_ERR_BUSY if it is still running, or the error it met. */
int gpu_ids_poll(struct gpu_ids_batch *);
/* Blocks until the last submission completes; returns its status. */
int gpu_ids_wait(struct gpu_ids_batch *);

/* Synchronous match of any number of packets (split into batches as
 * needed).  Safe from several threads at once. */
int gpu_ids_match(struct gpu_ids_matcher *, const uint8_t *data,
                  const uint32_t *offsets,
                  const struct gpu_ids_pkt_hdr *hdrs, size_t n_packets,
                  struct gpu_ids_verdict *verdicts);

struct gpu_ids_matcher_stats {
    enum gpu_ids_backend backend;   /* CPU or CUDA, never DEFAULT. */
    uint64_t n_packets;             /* Packets matched. */
    uint64_t n_bytes;
    uint64_t n_batches;
    uint64_t n_matched;             /* Packets with a verdict (CUDA:
                                     * not counted for re-runs, whose
                                     * verdicts stay on the device). */
    uint64_t n_hits;                /* Automaton hits checked. */
    uint64_t n_fallbacks;           /* Batches redone on the CPU. */
    uint64_t scan_ns, check_ns;     /* CUDA device time in the scan and
                                     * check kernels, with 'profile'. */
    uint64_t confirm_ns;            /* Of check_ns, the first of its two
                                     * kernels (confirm the hits, dedupe,
                                     * headers); the rest is the rules'
                                     * contents. */
    uint64_t n_runtime_calls;       /* CUDA runtime calls that queued
                                     * the n_batches submissions' work
                                     * (copies, memsets, launches, event
                                     * records); 0 on the CPU. */
    uint64_t n_completion_checks;   /* CUDA event queries and syncs of
                                     * gpu_ids_poll() and gpu_ids_wait()
                                     * for them. */
    uint64_t n_set_clears;          /* Of n_runtime_calls, clears of the
                                     * device's (packet, pattern) set: at
                                     * a batch's first submission, when
                                     * its hit lists grow and once in
                                     * 65,535 submissions. */
    uint64_t n_device_launches;     /* Submissions launched by the
                                     * device (no runtime call: the
                                     * batch's scheduler was rung)... */
    uint64_t n_scheduler_launches;  /* ...and of n_runtime_calls, the
                                     * launches of a parked scheduler
                                     * that took such a ring. */
};

void gpu_ids_matcher_get_stats(struct gpu_ids_matcher *,
                               struct gpu_ids_matcher_stats *);

/* Matches of each rule since the matcher was created, over every batch:
 * 'counts[i]' for rule i, 'n' at least gpu_ids_ruleset_n_rules().  On
 * CUDA this reads the device counters (after the batches waited for). */
int gpu_ids_matcher_rule_counts(struct gpu_ids_matcher *, uint64_t *counts,
                                size_t n);

/* Control-flow efficiency of the scan loop for this batch layout: the
 * share of lane-iterations doing work, for warps of 32 threads, with
 * remapping (fixed chunks of 'chunk_bytes', plus warm-up) or without (one
 * packet per thread).  For the benchmark's report. */
double gpu_ids_scan_cfe(const uint32_t *offsets, size_t n_packets,
                        bool remap, uint32_t chunk_bytes,
                        uint32_t max_depth);

/* True if the CUDA backend was built in and a device is usable. */
bool gpu_ids_cuda_available(void);

#ifdef __cplusplus
}
#endif

#endif /* gpu-ids.h */
