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

#ifndef PLUGIN_HOOKS_H
#define PLUGIN_HOOKS_H 1

/* The fuzz targets of the plugin reach its parsers, which are static,
 * through the hook-*.c files: each includes one of the plugin's sources
 * whole (so the binary runs exactly the code ovs-vswitchd does, with no
 * change to it for the tests) and adds these entry points.  A target links
 * the hooks in place of those sources' own objects. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Silences OVS's logging (the parsers warn about what they refuse) and
 * sets up what the hooks need.  Call once, first. */
void fuzz_plugin_init(void);

/* Aborts (a finding) if a parser's 'error' is an empty message, which a
 * user could not read; frees it.  NULL (no error) is fine. */
void fuzz_check_error(char *error);

/* hook-fec.c: fec_parse_args() of fec_encode ('encoder') or fec_decode. */
char *fuzz_fec_parse_args(const char *args, bool encoder);
/* hook-fec.c: a fec_decode instance, fresh for the call, on the frames
 * of 'data' (see fec_decode_target.c for the format). */
void fuzz_fec_decode(const uint8_t *data, size_t size);
/* hook-fec.c: writes seeds for fuzz_fec_decode() in 'dir', made by a real
 * fec_encode instance. */
void fuzz_fec_generate(const char *dir);

/* hook-re.c: re_parse_args() of re_encode and re_decode. */
char *fuzz_re_parse_args(const char *args);

/* hook-ids.c: ids_parse_config(), a gpu-ids-ruleset-NAME value. */
char *fuzz_ids_parse_config(const char *value);
/* hook-index.c: index_parse_config(), a gpu-index-store-NAME value. */
char *fuzz_index_parse_config(const char *value);

/* hook-actions.c: the check OVS calls for a flow's action (gpu_ids or
 * gpu_index: the others create an instance for every good argument
 * string, which a fuzzer would pile up without end; their parsers are
 * above). */
char *fuzz_actions_check(bool index, const char *args);

/* hook-plugin.c: the plugin's own other_config keys. */
size_t fuzz_plugin_n_keys(void);
const char *fuzz_plugin_key_name(size_t i);
/* Parses 'value' for key 'i' as a reconfiguration would, and formats the
 * setting in effect after it.  Returns false if it was refused. */
bool fuzz_plugin_parse(size_t i, const char *value, char *err,
                       size_t err_size);
/* Applies 'n' key=value pairs as one reconfiguration of other_config
 * (gpu_plugin_set_config), as OVSDB would hand them over. */
void fuzz_plugin_set_config(const char *const *keys,
                            const char *const *values, size_t n);

#endif /* plugin-hooks.h */
