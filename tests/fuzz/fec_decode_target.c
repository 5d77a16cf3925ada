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

/* Fuzzes the fec_decode service (ovs_plugin/gpu-fec-service.c) with coded
 * frames from the wire: the FEC header parsing, the decoder's groups
 * (their memory limits and timeouts) and their completion, which rebuilds
 * lost frames with the parity library (gpu_services/parity/).
 *
 * The target is built against Open vSwitch's library: the decoder works
 * on OVS's dp_packet batches, hmap and lists, and fuzzing it there runs
 * the exact code ovs-vswitchd does, group completion included, without a
 * second copy of the frame handling made for the tests.
 *
 * Input: see fuzz_fec_decode() in hook-fec.c.  With FUZZ_GEN_CORPUS=DIR
 * in the environment, the target instead writes seeds in DIR, coded by a
 * real fec_encode instance with some frames lost, and exits ("make
 * fuzz-corpus"). */

#include <config.h>

#include "tests/fuzz/fuzzer.h"

#include "tests/fuzz/plugin-hooks.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *gen = getenv("FUZZ_GEN_CORPUS");

    fuzz_plugin_init();
    if (gen) {
        fuzz_fec_generate(gen);
        exit(0);
    }
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_fec_decode(data, size);
    return 0;
}
