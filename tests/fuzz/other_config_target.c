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

/* Fuzzes the parsers of the plugin's other_config values, which an
 * operator sets with ovs-vsctl: the plugin's own keys (gpu-offload,
 * gpu-device, gpu-dpcls-*, ... in ovs_plugin/gpu-plugin.c), the IDS
 * rulesets' (gpu-ids-ruleset-NAME=PATH[,partial][,commented]) and the
 * recorder stores' (gpu-index-store-NAME=DIR[,options]); and whole
 * reconfigurations, several keys at once, through gpu_plugin_apply().
 * Built against Open vSwitch's library, like the plugin.
 *
 * Input: one byte that picks the parser (below the plugin's key count: that
 * key; then the ruleset, the store, and a whole reconfiguration), then the
 * value; for a reconfiguration, values separated by newlines, one for
 * each plugin key in turn. */

#include <config.h>

#include "tests/fuzz/fuzzer.h"

#include "tests/fuzz/plugin-hooks.h"

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
    size_t n_keys = fuzz_plugin_n_keys();
    char err[256];
    char *value;
    size_t which;

    if (!size) {
        return 0;
    }
    which = data[0] % (n_keys + 3);
    value = fuzz_strndup(data + 1, size - 1);
    if (which < n_keys) {
        fuzz_plugin_parse(which, value, err, sizeof err);
    } else if (which == n_keys) {
        fuzz_check_error(fuzz_ids_parse_config(value));
    } else if (which == n_keys + 1) {
        fuzz_check_error(fuzz_index_parse_config(value));
    } else {
        const char *names[16], *values[16];
        char *save_ptr = NULL;
        size_t n = 0;

        for (char *v = strtok_r(value, "\n", &save_ptr); v && n < n_keys;
             v = strtok_r(NULL, "\n", &save_ptr)) {
            names[n] = fuzz_plugin_key_name(n);
            values[n++] = v;
        }
        fuzz_plugin_set_config(names, values, n);
    }
    free(value);
    return 0;
}
