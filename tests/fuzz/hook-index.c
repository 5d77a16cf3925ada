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

#include "tests/fuzz/plugin-hooks.h"

char *
fuzz_index_parse_config(const char *value)
{
    struct gpu_index_recorder_config cfg;
    char *dir;
    char *error = index_parse_config(value, &cfg, &dir);

    if (!error) {
        /* What a good value gives must be usable as it is. */
        if (!dir || dir[0] != '/' || cfg.dir != dir) {
            abort();
        }
        free(dir);
    }
    return error;
}
