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
#include "ovs_plugin/gpu-re-service.c"

#include "tests/fuzz/plugin-hooks.h"

char *
fuzz_re_parse_args(const char *args)
{
    char *error = NULL;

    /* Both ends: in-flight= and hold-us= are the encoder's alone. */
    for (int encoder = 0; encoder < 2; encoder++) {
        struct gpu_re_config cfg;
        unsigned int in_flight, hold_us;
        char *name, *options;

        free(error);
        error = re_parse_args(args, encoder, &cfg, &name, &options,
                              &in_flight, &hold_us);
        if (!error) {
            ovs_assert(in_flight >= 1
                       && in_flight < GPU_SERVICE_GATHERS_MAX);
            ovs_assert(hold_us <= GPU_SERVICE_HOLD_US_MAX);
            free(name);
            free(options);
        }
    }
    return error;
}
