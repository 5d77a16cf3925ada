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

/* Fuzzes the parsers of the GPU service actions' arguments, which come
 * from an operator's flows (ovs-ofctl add-flow ...,actions=gpu_ids(...)):
 * gpu_service_args_split() (ovs_plugin/gpu-actions.c), the argument
 * parsers of fec_encode and fec_decode (fec_parse_args), of re_encode and
 * re_decode (re_parse_args), and the checks OVS runs for gpu_ids and
 * gpu_index flows (gpu_actions_check).  Built against Open vSwitch's
 * library, like the plugin.
 *
 * Input: one byte that picks the parser, then the argument text. */

#include <config.h>

#include "tests/fuzz/fuzzer.h"

#include <stdio.h>
#include <sys/param.h>

#include "tests/fuzz/plugin-hooks.h"

/* As OVS's gpu-service.h limits them. */
#define ARGS_MAX 255

char *gpu_service_args_split(const char *args, const char *const keys[],
                             const char *values[], char *buf,
                             size_t buf_size);

int LLVMFuzzerInitialize(int *argc, char ***argv);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_plugin_init();
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const keys[] = {
        "k=", "m=", "group_timeout=", "alert", "ruleset=", "x", NULL
    };
    const char *values[sizeof keys / sizeof keys[0]];
    char buf[ARGS_MAX + 1];
    char *args;

    if (!size) {
        return 0;
    }
    args = fuzz_strndup(data + 1, size - 1);
    switch (data[0] % 7) {
    case 0: {
        char *error = gpu_service_args_split(args, keys, values, buf,
                                             sizeof buf);
        if (!error) {
            /* The values point into 'buf', at what followed "key=". */
            for (size_t i = 0; keys[i]; i++) {
                if (values[i] && values[i][0]
                    && (values[i] < buf || values[i] >= buf + sizeof buf)) {
                    abort();
                }
            }
        }
        fuzz_check_error(error);
        break;
    }
    case 1:
        fuzz_check_error(fuzz_fec_parse_args(args, true));
        break;
    case 2:
        fuzz_check_error(fuzz_fec_parse_args(args, false));
        break;
    case 3:
        fuzz_check_error(fuzz_re_parse_args(args));
        break;
    case 4:
        fuzz_check_error(fuzz_actions_check(false, args));
        break;
    case 5:
        fuzz_check_error(fuzz_actions_check(true, args));
        break;
    case 6:
        /* A buffer just large enough, or one byte short. */
        fuzz_check_error(gpu_service_args_split(args, keys, values, buf,
                                           MIN(sizeof buf,
                                               strlen(args) + (size & 1))));
        break;
    }
    free(args);
    return 0;
}
