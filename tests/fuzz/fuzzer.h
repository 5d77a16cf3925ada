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

#ifndef FUZZER_H
#define FUZZER_H 1

/* What every libFuzzer target of tests/fuzz/ defines, as in Open vSwitch's
 * tests/oss-fuzz/fuzzer.h, and small helpers the targets share. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Returns a malloc()'d NUL-terminated copy of 'data'.  Parsers of text
 * (rules, queries, arguments) take C strings; a NUL inside the input just
 * ends the string early, as it would in OVSDB or a file read with fgets. */
static inline char *
fuzz_strndup(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);

    if (s) {
        memcpy(s, data, size);
        s[size] = '\0';
    }
    return s;
}

/* A reader of length-prefixed records: each is a 16-bit big-endian length
 * and that many bytes (fewer at the end of the input). */
struct fuzz_reader {
    const uint8_t *p;
    size_t left;
};

static inline bool
fuzz_next_record(struct fuzz_reader *r, const uint8_t **rec, size_t *len)
{
    size_t n;

    if (r->left < 2) {
        return false;
    }
    n = ((size_t) r->p[0] << 8) | r->p[1];
    r->p += 2;
    r->left -= 2;
    if (n > r->left) {
        n = r->left;
    }
    *rec = r->p;
    *len = n;
    r->p += n;
    r->left -= n;
    return true;
}

#endif /* fuzzer.h */
