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

/* Where a frame's IP payload is: the parse that the switch's services run
 * on the host (ovs_plugin's gpu_service_parse_packet()) and that gpu_ids
 * runs on the device for frames handed to it whole, written once so that
 * both find the same bytes. */

#ifndef GPU_FRAME_H
#define GPU_FRAME_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define GPU_FRAME_HD static __host__ __device__ __forceinline__
#else
#define GPU_FRAME_HD static inline
#endif

/* VLAN tags (802.1Q, 802.1ad) looked past for a frame's ethertype: a VLAN
 * or QinQ link's. */
#define GPU_FRAME_MAX_VLAN_TAGS 2

#define GPU_FRAME_ETH_ADDRS 12      /* Destination and source. */
#define GPU_FRAME_VLAN_TAG 4
#define GPU_FRAME_ETH_TYPE_IP 0x0800
#define GPU_FRAME_ETH_TYPE_IPV6 0x86dd
#define GPU_FRAME_ETH_TYPE_VLAN 0x8100
#define GPU_FRAME_ETH_TYPE_QINQ 0x88a8

/* What a frame starts with. */
enum gpu_frame_kind {
    GPU_FRAME_ETH,              /* An Ethernet header. */
    GPU_FRAME_IPV4,             /* An IPv4 header (OVS's PT_IPV4). */
    GPU_FRAME_IPV6,             /* An IPv6 header (OVS's PT_IPV6). */
};

struct gpu_frame_l4 {
    bool is_ip;                 /* IPv4 or IPv6, not a later fragment. */
    bool is_ipv6;
    uint8_t ip_proto;           /* IPPROTO_*, if 'is_ip'. */
    uint16_t sport, dport;      /* TCP/UDP ports, host order, else 0. */
    uint16_t l3_ofs;            /* Offset of the IP header. */
    uint16_t l4_ofs;            /* Offset of the L4 header. */
    uint16_t payload_ofs;       /* Offset of the L4 payload (TCP/UDP) or
                                 * of the IP payload (other protocols). */
    uint32_t payload_len;       /* 0 unless 'is_ip'. */
};

GPU_FRAME_HD uint16_t
gpu_frame_be16(const uint8_t *p)
{
    return (uint16_t) ((p[0] << 8) | p[1]);
}

/* Returns the ethertype (host order) of the Ethernet frame 'd' of 'size'
 * bytes, behind up to GPU_FRAME_MAX_VLAN_TAGS VLAN tags, and in '*ofs' the
 * offset of what follows it; 0 if the frame is too short or has more
 * tags. */
GPU_FRAME_HD uint16_t
gpu_frame_eth_type(const uint8_t *d, size_t size, size_t *ofs)
{
    size_t o = GPU_FRAME_ETH_ADDRS;

    for (int n_tags = 0; size >= o + 2; n_tags++) {
        uint16_t type = gpu_frame_be16(d + o);

        if (type != GPU_FRAME_ETH_TYPE_VLAN
            && type != GPU_FRAME_ETH_TYPE_QINQ) {
            *ofs = o + 2;
            return type;
        }
        if (n_tags == GPU_FRAME_MAX_VLAN_TAGS) {
            break;
        }
        o += GPU_FRAME_VLAN_TAG;
    }
    return 0;
}

/* Parses the IPv4 or IPv6 packet at 'd' + 'ofs' ('end' bytes in all)
 * into 'p', which the caller zeroed. */
GPU_FRAME_HD void
gpu_frame_parse_ip(const uint8_t *d, size_t ofs, size_t end, bool ipv6,
                   struct gpu_frame_l4 *p)
{
    size_t l4, stop;
    uint8_t proto;

    if (!ipv6) {
        if (end - ofs < 20 || (d[ofs] >> 4) != 4) {
            return;
        }
        size_t ihl = (d[ofs] & 0xf) * 4;
        size_t tot_len = gpu_frame_be16(d + ofs + 2);
        if (ihl < 20 || tot_len < ihl || tot_len > end - ofs) {
            return;
        }
        if (gpu_frame_be16(d + ofs + 6) & 0x1fff) {
            return;             /* A later fragment: no L4 header. */
        }
        proto = d[ofs + 9];
        l4 = ofs + ihl;
        stop = ofs + tot_len;   /* Without Ethernet padding. */
    } else {
        if (end - ofs < 40 || (d[ofs] >> 4) != 6) {
            return;
        }
        stop = ofs + 40 + gpu_frame_be16(d + ofs + 4);
        if (stop > end) {
            return;
        }
        proto = d[ofs + 6];
        l4 = ofs + 40;
        /* Extension headers: hop-by-hop, routing, destination options and
         * fragment (a later fragment has no L4 header). */
        for (int i = 0; i < 8; i++) {
            if (proto == 0 || proto == 43 || proto == 60) {
                if (stop - l4 < 8) {
                    return;
                }
                size_t len = (d[l4 + 1] + 1) * 8;
                if (stop - l4 < len) {
                    return;
                }
                proto = d[l4];
                l4 += len;
            } else if (proto == 44) {
                if (stop - l4 < 8 || gpu_frame_be16(d + l4 + 2) & 0xfff8) {
                    return;
                }
                proto = d[l4];
                l4 += 8;
            } else {
                break;
            }
        }
    }

    p->is_ip = true;
    p->is_ipv6 = ipv6;
    p->ip_proto = proto;
    p->l3_ofs = ofs;
    p->l4_ofs = l4;
    p->payload_ofs = l4;
    if (proto == 6 /* TCP */ && stop - l4 >= 20) {
        size_t doff = (d[l4 + 12] >> 4) * 4;
        p->sport = gpu_frame_be16(d + l4);
        p->dport = gpu_frame_be16(d + l4 + 2);
        p->payload_ofs = doff >= 20 && doff <= stop - l4 ? l4 + doff : stop;
    } else if (proto == 17 /* UDP */ && stop - l4 >= 8) {
        p->sport = gpu_frame_be16(d + l4);
        p->dport = gpu_frame_be16(d + l4 + 2);
        p->payload_ofs = l4 + 8;
    } else if (proto == 6 || proto == 17) {
        p->payload_ofs = stop;  /* Truncated header: nothing to scan. */
    }
    p->payload_len = stop - p->payload_ofs;
}

/* Parses the frame 'd' of 'size' bytes, which starts as 'kind' says, into
 * '*p': all zero (not IP) unless it is an IPv4 or IPv6 packet, behind at
 * most GPU_FRAME_MAX_VLAN_TAGS tags, whose headers fit.  Frames of over
 * 65,535 bytes (TSO) are not parsed: offsets are 16 bits, like OVS's
 * dp_packet's. */
GPU_FRAME_HD void
gpu_frame_parse(const uint8_t *d, size_t size, enum gpu_frame_kind kind,
                struct gpu_frame_l4 *p)
{
    *p = (struct gpu_frame_l4) { .is_ip = false };
    if (size > UINT16_MAX) {
        return;
    }
    if (kind == GPU_FRAME_IPV4) {
        gpu_frame_parse_ip(d, 0, size, false, p);
    } else if (kind == GPU_FRAME_IPV6) {
        gpu_frame_parse_ip(d, 0, size, true, p);
    } else {
        size_t ofs = 0;
        uint16_t type = gpu_frame_eth_type(d, size, &ofs);

        if (type == GPU_FRAME_ETH_TYPE_IP) {
            gpu_frame_parse_ip(d, ofs, size, false, p);
        } else if (type == GPU_FRAME_ETH_TYPE_IPV6) {
            gpu_frame_parse_ip(d, ofs, size, true, p);
        }
    }
}

#endif /* gpu-frame.h */
