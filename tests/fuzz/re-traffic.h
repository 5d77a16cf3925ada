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

#ifndef RE_TRAFFIC_H
#define RE_TRAFFIC_H 1

/* Real traffic for the RE decoder's fuzz target and its corpus generator
 * (gen-re-corpus.c): the same deterministic frames, encoded by the real
 * encoder, prime the target's decoder and make the seed corpus, so that
 * the references in the corpus resolve in the target's cache. */

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gpu_services/re/gpu-re.h"

/* Frames that prime the decoder; the corpus encodes the ones after. */
#define RE_TRAFFIC_PRIME 12

/* Small, so that creating the pair for every input stays cheap. */
static inline void
re_traffic_config(struct gpu_re_config *cfg)
{
    gpu_re_config_init(cfg);
    cfg->cache_size = 256 * 1024;
    cfg->epoch = 0x4e21;        /* Not random: the corpus must resolve. */
}

/* Payload 'i': HTTP responses that share most of their text, as a web
 * server's replies do, in 'buf' (1400 bytes at least).  Returns its
 * length. */
static inline size_t
re_traffic_payload(unsigned int i, uint8_t *buf)
{
    static const char *const words[] = {
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf",
        "hotel", "india", "juliett", "kilo", "lima", "mike", "november",
    };
    uint32_t x = 2654435761u * (i / 3 + 1);
    int n;

    n = snprintf((char *) buf, 1400,
                 "HTTP/1.1 200 OK\r\nServer: ovs-gpu-fuzz/1.0\r\n"
                 "Content-Type: text/html; charset=utf-8\r\n"
                 "Cache-Control: max-age=3600, public\r\n"
                 "X-Request: %u\r\n\r\n<html><head><title>Report %u"
                 "</title></head><body>", i, i / 3);
    for (int w = 0; n < 1200 && w < 60; w++) {
        x = x * 1103515245u + 12345u;
        n += snprintf((char *) buf + n, 1400 - n, "<p>%s %s %s</p>\n",
                      words[(x >> 16) % 14], words[(x >> 8) % 14],
                      words[(w + i / 3) % 14]);
    }
    return n < 1400 ? n : 1399;
}

static inline void
re_put16(uint8_t *p, uint16_t v)
{
    p[0] = v >> 8;
    p[1] = v;
}

/* Recomputes the header checksum of the IPv4 header at 'ip'. */
static inline void
re_traffic_ipv4_csum(uint8_t *ip)
{
    size_t ihl = (ip[0] & 0x0f) * 4;
    uint32_t sum = 0;

    re_put16(ip + 10, 0);
    for (size_t j = 0; j + 1 < ihl; j += 2) {
        sum += (ip[j] << 8) | ip[j + 1];
    }
    while (sum >> 16) {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    re_put16(ip + 10, ~sum);
}

/* Frame 'i': payload 'i' in TCP (even 'i') or UDP over IPv4 over
 * Ethernet, in 'f' (1500 bytes at least).  Returns its length. */
static inline size_t
re_traffic_frame(unsigned int i, uint8_t *f)
{
    bool tcp = !(i & 1);
    size_t l4_len = tcp ? 20 : 8;
    size_t plen = re_traffic_payload(i, f + 14 + 20 + l4_len);
    size_t ip_len = 20 + l4_len + plen;
    uint8_t *ip = f + 14, *l4 = ip + 20;

    memcpy(f, "\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00",
           14);
    memset(ip, 0, 20 + l4_len);
    ip[0] = 0x45;
    re_put16(ip + 2, ip_len);
    re_put16(ip + 4, i);
    ip[8] = 64;
    ip[9] = tcp ? 6 : 17;
    memcpy(ip + 12, "\x0a\x00\x00\x01\x0a\x00\x00\x02", 8);
    re_traffic_ipv4_csum(ip);
    re_put16(l4, 80);
    re_put16(l4 + 2, 40000 + (i % 3));
    if (tcp) {
        l4[12] = 5 << 4;
        l4[13] = 0x18;          /* PSH, ACK. */
        re_put16(l4 + 14, 65535);
    } else {
        re_put16(l4 + 4, 8 + plen);
    }
    return 14 + ip_len;
}

/* Encodes frames 0 .. RE_TRAFFIC_PRIME - 1 on 'enc' and decodes them on
 * 'dec' (either may be NULL), as a link would carry them.  Returns false
 * if a frame did not come back as it was. */
static inline bool
re_traffic_prime(struct gpu_re_encoder *enc, struct gpu_re_decoder *dec)
{
    for (unsigned int i = 0; i < RE_TRAFFIC_PRIME; i++) {
        uint8_t frame[1600], orig[1600];
        size_t len = re_traffic_frame(i, frame), orig_len = len;
        int r;

        memcpy(orig, frame, len);
        if (enc && gpu_re_encode_packet(enc, frame, &len, 1514) < 0) {
            return false;
        }
        if (dec) {
            r = gpu_re_decode_packet(dec, frame, &len, 1514);
            if ((r != GPU_RE_DECODED && r != GPU_RE_RAW)
                || len != orig_len || memcmp(frame, orig, len)) {
                return false;
            }
        }
    }
    return true;
}

#endif /* re-traffic.h */
