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

/* Fuzzes the parse that finds a packet's IP payload and ports
 * (gpu_runtime/gpu-frame.h): every service runs it on packets from the
 * wire, and gpu_ids's matcher runs it on frames given whole, on the
 * device too, where a read past a frame would fault the context (in
 * place, it would read another packet's memory).  The input is one frame,
 * exactly: AddressSanitizer stops any read past it.  It is parsed as an
 * Ethernet frame and as a bare IPv4 and IPv6 packet (OVS's packet types),
 * and what each parse finds must lie inside the frame; gpu_ids's
 * resolution of it as a frame (gpu_ids_frame_resolve(), the function the
 * CPU backend, the host and the device kernel call) must find the same
 * payload and header. */

#include <config.h>

#include "tests/fuzz/fuzzer.h"

#include "gpu_runtime/gpu-frame.h"
#include "gpu_services/ids/ids-inline.h"

static void
check_parse(const uint8_t *data, size_t size, enum gpu_frame_kind kind,
            struct gpu_frame_l4 *l4)
{
    gpu_frame_parse(data, size, kind, l4);
    if (!l4->is_ip) {
        /* Nothing found is nothing at all: no payload to scan. */
        if (l4->is_ipv6 || l4->ip_proto || l4->sport || l4->dport
            || l4->l3_ofs || l4->l4_ofs || l4->payload_ofs
            || l4->payload_len) {
            abort();
        }
        return;
    }
    if (size > UINT16_MAX
        || l4->l3_ofs >= size
        || l4->l4_ofs < l4->l3_ofs || l4->l4_ofs > size
        || l4->payload_ofs < l4->l4_ofs || l4->payload_ofs > size
        || l4->payload_len > size - l4->payload_ofs) {
        abort();
    }
    if (!(l4->ip_proto == 6 || l4->ip_proto == 17)
        && (l4->sport || l4->dport)) {
        abort();                /* Ports only for TCP and UDP. */
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gpu_frame_l4 eth, l4;

    check_parse(data, size, GPU_FRAME_ETH, &eth);
    check_parse(data, size, GPU_FRAME_IPV4, &l4);
    check_parse(data, size, GPU_FRAME_IPV6, &l4);

    if (size <= UINT32_MAX) {
        struct gpu_ids_pkt_hdr hdr = { .flags = GPU_IDS_HDR_FRAME };
        uint32_t ofs = gpu_ids_frame_resolve(data, size, &hdr);

        if ((hdr.flags & GPU_IDS_HDR_FRAME)
            || !(hdr.flags & GPU_IDS_HDR_PARSED)
            || !(hdr.flags & GPU_IDS_HDR_IP) != !eth.is_ip
            || (eth.is_ip
                && (ofs != eth.payload_ofs
                    || hdr.payload_len != eth.payload_len
                    || hdr.proto != eth.ip_proto
                    || hdr.sport != eth.sport || hdr.dport != eth.dport))
            || (!eth.is_ip && (ofs || hdr.payload_len))) {
            abort();
        }
    }
    return 0;
}
