/*
 * Copyright (c) 2026 The ovs-gpu authors.
 *
 * Licensed under the Apache License, Version 2.0 (the "License");
 * you may not use this file except in compliance with the License.
 * You may obtain a copy of the License at:
 *
 *     http://www.apache.org/licenses/LICENSE-2.0
 *
 * Unless required by applicable law or agreed to in writing, software
 * distributed under the License is distributed on an "AS IS" BASIS,
 * WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 * See the License for the specific language governing permissions and
 * limitations under the License.
 */

/* Fuzzes the Snort rule parser and compiler (gpu_services/ids/ids-rules.c)
 * with rule text, as an operator's rule file gives it: every rule that
 * loads is then matched, on the CPU, against the input itself, so that
 * what the parser built is also used.
 *
 * Input: one byte of load options (bit 0 partial, bit 1 commented), then
 * the rule text. */

#include <config.h>

#include "tests/fuzz/fuzzer.h"

#include <stdio.h>

#include "gpu_services/ids/gpu-ids.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gpu_ids_load_options opts = { .partial = false };
    struct gpu_ids_matcher_config mcfg;
    struct gpu_ids_ruleset_stats st;
    struct gpu_ids_matcher *matcher;
    struct gpu_ids_ruleset *rs;
    char err[256];
    char *text;

    if (!size) {
        return 0;
    }
    opts.partial = data[0] & 1;
    opts.commented = data[0] & 2;
    text = fuzz_strndup(data + 1, size - 1);
    if (!text) {
        return 0;
    }
    err[0] = '\0';
    if (gpu_ids_ruleset_load_string(text, "fuzz", &opts, &rs, err,
                                    sizeof err)) {
        /* A refused file must say why. */
        if (!err[0]) {
            abort();
        }
        free(text);
        return 0;
    }
    gpu_ids_ruleset_get_stats(rs, &st);
    if (st.n_loaded + st.n_skipped != st.n_rules) {
        abort();
    }
    for (size_t i = 0; i < 4; i++) {
        const char *name;
        uint32_t count;

        gpu_ids_ruleset_option_counts(rs, i, &name, &count);
    }

    gpu_ids_matcher_config_init(&mcfg);
    mcfg.backend = GPU_IDS_BACKEND_CPU;
    if (!gpu_ids_matcher_create(rs, &mcfg, &matcher)) {
        static const uint8_t protos[] = { 6, 17, 1 };
        struct gpu_ids_pkt_hdr hdrs[3];
        struct gpu_ids_verdict verdicts[3];
        uint32_t offsets[4];
        size_t len = size - 1;

        /* The input itself, as the payload of a TCP, a UDP and an ICMP
         * packet to and from port 80: patterns from the rules appear in
         * it. */
        for (size_t i = 0; i < 3; i++) {
            hdrs[i] = (struct gpu_ids_pkt_hdr) {
                .proto = protos[i], .sport = 80, .dport = 80,
            };
            offsets[i] = 0;
        }
        offsets[0] = 0;
        offsets[1] = len / 3;
        offsets[2] = 2 * (len / 3);
        offsets[3] = len;
        gpu_ids_match(matcher, data + 1, offsets, hdrs, 3, verdicts);
        gpu_ids_matcher_destroy(matcher);
    }
    gpu_ids_ruleset_destroy(rs);
    free(text);
    return 0;
}
