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
#include "ovs_plugin/gpu-plugin.c"

#include "openvswitch/vlog.h"
#include "smap.h"

#include "tests/fuzz/plugin-hooks.h"

void
fuzz_plugin_init(void)
{
    /* The parsers log what they refuse: at fuzzing rates that is all the
     * output there would be. */
    vlog_set_levels(NULL, VLF_ANY_DESTINATION, VLL_OFF);
    gpu_plugin_apply(NULL, true);
}

void
fuzz_check_error(char *error)
{
    if (error && !error[0]) {
        abort();
    }
    free(error);
}

size_t
fuzz_plugin_n_keys(void)
{
    return ARRAY_SIZE(keys);
}

const char *
fuzz_plugin_key_name(size_t i)
{
    return keys[i].name;
}

bool
fuzz_plugin_parse(size_t i, const char *value, char *err, size_t err_size)
{
    struct ds s = DS_EMPTY_INITIALIZER;
    bool ok;

    err[0] = '\0';
    ok = keys[i].parse(value, err, err_size);
    if (!ok && !err[0]) {
        abort();                /* A refused value must say why. */
    }
    keys[i].format(&s);
    if (!s.length) {
        abort();                /* gpu/show would show nothing. */
    }
    ds_destroy(&s);
    return ok;
}

void
fuzz_plugin_set_config(const char *const *names, const char *const *values,
                       size_t n)
{
    struct smap config = SMAP_INITIALIZER(&config);

    for (size_t i = 0; i < n; i++) {
        smap_replace(&config, names[i], values[i]);
    }
    gpu_plugin_apply(&config, false);
    smap_destroy(&config);
}
