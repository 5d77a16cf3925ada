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

/* Fuzzing hook: see plugin-hooks.h. */
#include "ovs_plugin/gpu-index-service.c"

#include <stdio.h>

#include "tests/fuzz/plugin-hooks.h"

/* An independent reading of a size "N[KMG]": false if it is not one or
 * does not fit in 64 bits. */
static bool
checked_size(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    int shift = 0;

    if (*s < '0' || *s > '9') {
        return false;
    }
    for (; *s >= '0' && *s <= '9'; s++) {
        if (v > (UINT64_MAX - (*s - '0')) / 10) {
            return false;
        }
        v = v * 10 + (*s - '0');
    }
    shift = (*s == 'K' || *s == 'k' ? 10 : *s == 'M' || *s == 'm' ? 20
             : *s == 'G' || *s == 'g' ? 30 : 0);
    s += shift > 0;
    if (*s || v > UINT64_MAX >> shift) {
        return false;
    }
    *out = v << shift;
    return true;
}

/* Checks that a value index_parse_config() took says what it got: every
 * retention size among the options fits, and the last one given is the
 * one in effect. */
static void
check_sizes(const char *value, const struct gpu_index_recorder_config *cfg)
{
    char *copy = xstrdup(value), *save_ptr = NULL, *item;
    bool have = false;
    uint64_t v, last = 0;

    /* The first item is the folder, whatever it looks like. */
    strtok_r(copy, ",", &save_ptr);
    while ((item = strtok_r(NULL, ",", &save_ptr))) {
        if (!strncmp(item, "retention=", 10)) {
            if (!checked_size(item + 10, &v)) {
                fprintf(stderr, "\"%s\" was taken, but \"%s\" does not "
                        "fit in 64 bits\n", value, item);
                abort();
            }
            have = true;
            last = v;
        }
    }
    if (have && cfg->retention_bytes != last) {
        fprintf(stderr, "\"%s\": retention %"PRIu64", expected %"PRIu64
                "\n", value, cfg->retention_bytes, last);
        abort();
    }
    free(copy);
}

char *
fuzz_index_parse_config(const char *value)
{
    static const char base[] = "/var/lib/ovs-gpu";
    struct gpu_index_recorder_config cfg;
    char *dir;
    char *error = index_parse_config(value, base, &cfg, &dir);

    if (!error) {
        /* What a good value gives must be usable as it is: a folder under
         * the base that does not climb out of it. */
        if (!dir || cfg.dir != dir || strncmp(dir, base, strlen(base))
            || dir[strlen(base)] != '/' || path_climbs(dir)) {
            fprintf(stderr, "\"%s\" gave folder \"%s\"\n", value,
                    dir ? dir : "(null)");
            abort();
        }
        check_sizes(value, &cfg);
        free(dir);
    }
    return error;
}
