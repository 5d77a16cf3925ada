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

/* Fuzzes the recorder's query parser (gpu_services/index/query.c), whose
 * text comes from an operator (ovs-appctl gpu-index/query, the
 * ovs-gpu-index tool).  A query that parses is evaluated on a real
 * segment index, both ways the library can: on the compressed columns
 * (gpu_index_query_eval) and record by record (gpu_index_query_match);
 * the two must agree, so that the fuzzer also checks the evaluator.
 *
 * Input: the query text. */

#include <config.h>

#include "tests/fuzz/fuzzer.h"

#include <stdio.h>

#include "tests/fuzz/index-records.h"

static struct gpu_index_record recs[INDEX_N_RECORDS];
static struct gpu_index_segment_index segs[2];  /* WAH, PLWAH. */

static void
init(void)
{
    struct gpu_index_builder *b;
    char why[256];

    for (unsigned int i = 0; i < INDEX_N_RECORDS; i++) {
        index_record_make(i, &recs[i]);
    }
    if (gpu_index_builder_create(GPU_INDEX_BACKEND_CPU, INDEX_N_RECORDS,
                                 &b, why, sizeof why)) {
        fprintf(stderr, "builder: %s\n", why);
        abort();
    }
    for (int e = 0; e < 2; e++) {
        gpu_index_segment_index_init(&segs[e]);
        if (gpu_index_segment_index_build(b, recs, INDEX_N_RECORDS,
                                          e ? GPU_INDEX_PLWAH
                                            : GPU_INDEX_WAH, &segs[e])) {
            abort();
        }
    }
    gpu_index_builder_destroy(b);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool initialized;
    struct gpu_index_query *q;
    char err[256];
    char *text;

    if (!initialized) {
        init();
        initialized = true;
    }
    text = fuzz_strndup(data, size);
    if (!text) {
        return 0;
    }
    err[0] = '\0';
    if (gpu_index_query_parse(text, &q, err, sizeof err)) {
        if (!err[0]) {
            abort();            /* A refused query must say why. */
        }
        free(text);
        return 0;
    }
    for (int e = 0; e < 2; e++) {
        uint32_t *rows = NULL;
        size_t n = 0, j = 0;

        if (gpu_index_query_eval(q, &segs[e], &rows, &n)) {
            continue;
        }
        for (uint32_t i = 0; i < INDEX_N_RECORDS; i++) {
            bool in_rows = j < n && rows[j] == i;

            if (in_rows != gpu_index_query_match(q, &recs[i])) {
                fprintf(stderr, "query \"%s\": row %u: eval says %d, "
                        "match says %d\n", text, i, in_rows, !in_rows);
                abort();
            }
            j += in_rows;
        }
        if (j != n) {
            fprintf(stderr, "query \"%s\": eval gave rows beyond the "
                    "segment or out of order\n", text);
            abort();
        }
        free(rows);
    }
    gpu_index_query_destroy(q);
    free(text);
    return 0;
}
