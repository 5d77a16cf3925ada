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

/* Fuzzes the RE decoder (gpu_services/re/re-codec.c) with what comes from
 * the wire: shims (gpu_re_decode) and whole frames (the packet-level
 * decap helper, gpu_re_decode_packet).  Every input starts from the same
 * decoder, primed with real encoded traffic (re-traffic.h), so that the
 * references of a shim made by the encoder resolve and the fuzzer reaches
 * the copy paths, not just the header checks.
 *
 * Input: one byte of mode, then records of a 16-bit big-endian length and
 * that many bytes (fuzzer.h).  Mode bit 0: the records are frames (else
 * shims, or payloads that came raw: bit 2 of the mode makes every other
 * record a raw payload for gpu_re_decoder_observe); bit 1: rewrite the
 * IPv4 header checksum of each frame first, since the decoder only takes
 * frames whose checksum is right and a mutation rarely keeps it so; bits
 * 4-7: room in the frame buffer beyond 1514 bytes, in 512-byte steps.
 *
 * With FUZZ_GEN_CORPUS=DIR in the environment, the target instead writes
 * its seeds in DIR, made by the real encoder after the same priming, and
 * exits ("make fuzz-corpus"). */

#include <config.h>

#include "tests/fuzz/fuzzer.h"

#include <stdio.h>

#include "tests/fuzz/re-traffic.h"

/* The priming traffic, as the encoder sent it. */
static uint8_t prime_frames[RE_TRAFFIC_PRIME][1600];
static size_t prime_lens[RE_TRAFFIC_PRIME];

static void
prime_init(void)
{
    struct gpu_re_config cfg;
    struct gpu_re_encoder *enc;

    re_traffic_config(&cfg);
    if (gpu_re_encoder_create(&cfg, NULL, &enc)) {
        abort();
    }
    for (unsigned int i = 0; i < RE_TRAFFIC_PRIME; i++) {
        prime_lens[i] = re_traffic_frame(i, prime_frames[i]);
        if (gpu_re_encode_packet(enc, prime_frames[i], &prime_lens[i],
                                 1514) < 0) {
            abort();
        }
    }
    gpu_re_encoder_destroy(enc);
}

static unsigned int run_input(const uint8_t *data, size_t size);

static void
put_record(FILE *f, const uint8_t *p, size_t n)
{
    fputc(n >> 8, f);
    fputc(n & 0xff, f);
    fwrite(p, 1, n, f);
}

static FILE *
seed_open(const char *dir, const char *name, unsigned int a, unsigned int b,
          uint8_t mode)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s-%u-%u-%02x", dir, name, a, b, mode);
    f = fopen(path, "w+b");
    if (!f) {
        perror(path);
        exit(1);
    }
    fputc(mode, f);
    return f;
}

/* Seeds: what the encoder sends after the priming traffic, as frames
 * (with and without the checksum rewrite) and as payload-level shims,
 * some with the raw payloads between. */
static void
generate(const char *dir)
{
    /* Every frame from the first after the priming: the decoder must see
     * the raw ones too, or its cache is not the encoder's. */
    static const unsigned int runs[][2] = {
        { 0, 1 }, { 0, 2 }, { 0, 3 }, { 0, 6 }, { 0, 12 },
    };

    for (size_t s = 0; s < sizeof runs / sizeof runs[0]; s++) {
        unsigned int skip = runs[s][0], n = runs[s][1];
        static const uint8_t modes[] = { 0x01, 0x03, 0x04, 0x21 };

        for (size_t m = 0; m < sizeof modes; m++) {
            struct gpu_re_config cfg;
            struct gpu_re_encoder *enc;
            uint8_t mode = modes[m];
            unsigned int n_shims = 0;
            FILE *f;

            re_traffic_config(&cfg);
            if (gpu_re_encoder_create(&cfg, NULL, &enc)
                || !re_traffic_prime(enc, NULL)) {
                abort();
            }
            f = seed_open(dir, mode & 1 ? "frames" : "shims", skip, n,
                          mode);
            for (unsigned int i = RE_TRAFFIC_PRIME;
                 i < RE_TRAFFIC_PRIME + skip + n; i++) {
                uint8_t frame[1600], shim[1600];
                size_t len = re_traffic_frame(i, frame), shim_len;
                int res;

                if (mode & 1) {
                    res = gpu_re_encode_packet(enc, frame, &len, 1514);
                    if (res < 0) {
                        abort();
                    }
                    if (i >= RE_TRAFFIC_PRIME + skip) {
                        put_record(f, frame, len);
                        n_shims += res == GPU_RE_SHIM;
                    }
                    continue;
                }
                /* The payload alone, at the payload level. */
                size_t l4 = 14 + 20 + (i & 1 ? 8 : 20);
                res = gpu_re_encode(enc, frame + l4, len - l4, NULL, 0,
                                    shim, sizeof shim, &shim_len);
                if (i < RE_TRAFFIC_PRIME + skip) {
                    continue;
                }
                if (res == GPU_RE_SHIM) {
                    put_record(f, shim, shim_len);
                    n_shims++;
                    if (mode & 4) {
                        put_record(f, (const uint8_t *) "", 0);
                    }
                } else if (res == GPU_RE_RAW && (mode & 4)) {
                    put_record(f, shim, 0);
                    put_record(f, frame + l4, len - l4);
                }
            }
            /* A seed is only worth its place if the target's decoder
             * decodes every shim in it. */
            long len = ftell(f);
            uint8_t *seed = malloc(len);
            fflush(f);
            rewind(f);
            if (fread(seed, 1, len, f) != len) {
                abort();
            }
            fclose(f);
            unsigned int n_decoded = run_input(seed, len);
            if (n_decoded != n_shims) {
                fprintf(stderr, "seed %s %u %u %02x: %u of %u shims "
                        "decode\n", mode & 1 ? "frames" : "shims", skip, n,
                        mode, n_decoded, n_shims);
                exit(1);
            }
            free(seed);
            gpu_re_encoder_destroy(enc);
        }
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *gen = getenv("FUZZ_GEN_CORPUS");

    if (gen) {
        generate(gen);
        exit(0);
    }
    return 0;
}

static void
check_result(int r, size_t len, size_t cap)
{
    /* The results the API documents, and no output past the buffer. */
    if (r != GPU_RE_DECODED && r != GPU_RE_RAW && r != GPU_RE_PASS
        && r != GPU_RE_UNDECODABLE) {
        fprintf(stderr, "unexpected result %d\n", r);
        abort();
    }
    if (len > cap) {
        fprintf(stderr, "length %zu beyond capacity %zu\n", len, cap);
        abort();
    }
}

/* Runs one input; returns how many records decoded. */
static unsigned int
run_input(const uint8_t *data, size_t size)
{
    static bool initialized;
    unsigned int n_decoded = 0;
    struct gpu_re_config cfg;
    struct gpu_re_decoder *dec;
    struct fuzz_reader r;
    const uint8_t *rec;
    size_t len;
    uint8_t mode;

    if (!initialized) {
        prime_init();
        initialized = true;
    }
    if (!size) {
        return 0;
    }
    mode = data[0];
    r = (struct fuzz_reader) { data + 1, size - 1 };

    re_traffic_config(&cfg);
    if (gpu_re_decoder_create(&cfg, &dec)) {
        abort();
    }
    for (unsigned int i = 0; i < RE_TRAFFIC_PRIME; i++) {
        uint8_t frame[1600];
        size_t flen = prime_lens[i];

        memcpy(frame, prime_frames[i], flen);
        gpu_re_decode_packet(dec, frame, &flen, 1514);
    }

    for (unsigned int n = 0; fuzz_next_record(&r, &rec, &len); n++) {
        if (mode & 1) {
            /* A frame, in a buffer as large as the link's frames: the
             * decoder grows it in place. */
            size_t cap = 1514 + (mode >> 4) * 512;
            uint8_t *frame;
            size_t flen = len;

            if (len > cap) {
                continue;
            }
            frame = malloc(cap);
            memcpy(frame, rec, len);
            if ((mode & 2) && len >= 34 && frame[12] == 0x08
                && frame[13] == 0 && (frame[14] >> 4) == 4
                && (frame[14] & 0xf) >= 5
                && 14 + (frame[14] & 0xf) * 4 <= len) {
                re_traffic_ipv4_csum(frame + 14);
            }
            int res = gpu_re_decode_packet(dec, frame, &flen, cap);

            check_result(res, flen, cap);
            n_decoded += res == GPU_RE_DECODED;
            free(frame);
        } else if ((mode & 4) && (n & 1)) {
            gpu_re_decoder_observe(dec, rec, len);
        } else {
            /* The shim alone, in a buffer of its own size, so that a read
             * past it is caught; the output buffer as the API asks (a
             * global: ASan guards its end too, and a 64 KB malloc() for
             * every record cost the run more time than the decoder). */
            static uint8_t out[GPU_RE_MAX_PAYLOAD];
            uint8_t *shim = malloc(len ? len : 1);
            size_t out_len = 0;
            int res;

            memcpy(shim, rec, len);
            res = gpu_re_decode(dec, shim, len, out, GPU_RE_MAX_PAYLOAD,
                                &out_len);
            if (res != GPU_RE_DECODED && res != GPU_RE_UNDECODABLE) {
                fprintf(stderr, "unexpected result %d\n", res);
                abort();
            }
            if (res == GPU_RE_DECODED && out_len > GPU_RE_MAX_PAYLOAD) {
                abort();
            }
            n_decoded += res == GPU_RE_DECODED;
            free(shim);
        }
    }
    gpu_re_decoder_destroy(dec);
    return n_decoded;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run_input(data, size);
    return 0;
}
