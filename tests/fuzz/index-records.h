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

#ifndef INDEX_RECORDS_H
#define INDEX_RECORDS_H 1

/* Packets for the index fuzz targets: a mix of what a recorder sees
 * (IPv4 and IPv6; TCP with various flags, UDP, ICMP, GRE, SCTP; tagged
 * and untagged; ARP), as records, so that the targets can evaluate a
 * query on a real segment index. */

#include <stdint.h>
#include <string.h>

#include "gpu_services/index/gpu-index.h"

#define INDEX_N_RECORDS 96

static inline void
idx_put16(uint8_t *p, uint16_t v)
{
    p[0] = v >> 8;
    p[1] = v;
}

/* Frame 'i' of the mix, in 'f' (128 bytes).  Returns its length. */
static inline size_t
index_frame_make(unsigned int i, uint8_t f[128])
{
    static const uint8_t protos[] = { 6, 17, 1, 47, 132, 6, 58 };
    size_t ofs = 12, len;
    uint8_t proto = protos[i % 7];
    bool v6 = i % 4 == 3;

    memset(f, 0, 128);
    memcpy(f, "\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01", 12);
    if (i % 5 == 0) {
        idx_put16(f + ofs, 0x8100);
        idx_put16(f + ofs + 2, 10 + i % 3);
        ofs += 4;
    }
    if (i % 11 == 10) {
        idx_put16(f + ofs, 0x0806);     /* ARP: no IP. */
        len = ofs + 30;
    } else if (!v6) {
        uint8_t *ip = f + ofs + 2;

        idx_put16(f + ofs, 0x0800);
        ip[0] = 0x45;
        idx_put16(ip + 2, 60);
        ip[8] = 64;
        ip[9] = proto == 58 ? 1 : proto;
        ip[12] = 10;
        ip[13] = i % 3;
        ip[15] = i % 7 + 1;
        ip[16] = 192;
        ip[17] = 168;
        ip[18] = i % 2;
        ip[19] = i;
        len = ofs + 2 + 60;
    } else {
        uint8_t *ip = f + ofs + 2;

        idx_put16(f + ofs, 0x86dd);
        ip[0] = 0x60;
        idx_put16(ip + 4, 40);
        ip[6] = proto;
        ip[7] = 64;
        ip[8] = 0x20;
        ip[9] = 0x01;
        ip[23] = i;
        ip[24] = 0xfe;
        ip[25] = 0x80;
        ip[39] = i % 5;
        len = ofs + 2 + 80;
    }
    if (i % 11 != 10) {
        uint8_t *l4 = f + ofs + 2 + (v6 ? 40 : 20);

        idx_put16(l4, i % 2 ? 53 : 1024 + i);
        idx_put16(l4 + 2, i % 3 ? 80 : 443);
        if (proto == 6) {
            l4[12] = 0x50;
            l4[13] = (uint8_t[]) { 0x02, 0x12, 0x10, 0x18, 0x11, 0x04 }
                     [i % 6];
        }
    }
    return len;
}

/* The capture time of frame 'i'. */
static inline uint64_t
index_frame_ts(unsigned int i)
{
    return 1700000000ull * 1000000000ull + i * 250000000ull;
}

/* Record 'i' of the mix. */
static inline void
index_record_make(unsigned int i, struct gpu_index_record *rec)
{
    uint8_t f[128];
    size_t len = index_frame_make(i, f);

    gpu_index_record_from_frame(rec, f, len, len + 4, index_frame_ts(i),
                                i % 4);
}

#endif /* index-records.h */
