/*
 * Unit tests of gpu_runtime: device discovery and its CPU fallback, the
 * parsers behind other_config:gpu-offload and gpu-device, pinned buffers
 * and streams.  They pass with and without a GPU: where the machine has
 * one, they check it is found; where not, that the CPU fallback says why.
 */
#include <config.h>

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gpu_runtime/gpu-runtime.h"
#include "tests/test-common.h"

static void
test_discovery(void **state)
{
    const char *why = NULL;
    int n = gpu_device_count(&why);

    assert_true(n >= 0);
    if (!n) {
        /* The CPU fallback must always explain itself. */
        assert_non_null(why);
        assert_true(strlen(why) > 0);
        print_message("no CUDA device: %s\n", why);

        struct gpu_device_info info;
        assert_int_equal(gpu_device_query(0, &info), GPU_ERR_NO_DEVICE);
        assert_int_equal(gpu_device_select(0), GPU_ERR_NO_DEVICE);
    } else {
        struct gpu_device_info info;
        assert_int_equal(gpu_device_query(0, &info), GPU_OK);
        assert_true(strlen(info.name) > 0);
        assert_true(info.cc_major >= 3);
        assert_true(info.total_mem > 0);
        print_message("device 0: %s, cc %d.%d, %llu bytes\n", info.name,
                      info.cc_major, info.cc_minor,
                      (unsigned long long) info.total_mem);
        assert_int_equal(gpu_device_query(n, &info), GPU_ERR_NO_DEVICE);
        assert_int_equal(gpu_device_select(0), GPU_OK);
    }
    if (!gpu_runtime_has_cuda()) {
        assert_int_equal(n, 0);
        assert_string_equal(why, "built without CUDA");
    }
}

static void
test_device_parse_good(void **state)
{
    struct gpu_device_choice c;
    char err[128];

    assert_int_equal(gpu_device_parse("cpu", &c, err, sizeof err), GPU_OK);
    assert_true(c.use_cpu);
    assert_int_equal(gpu_device_parse("0", &c, err, sizeof err), GPU_OK);
    assert_false(c.use_cpu);
    assert_int_equal(c.index, 0);
    assert_int_equal(gpu_device_parse("17", &c, err, sizeof err), GPU_OK);
    assert_int_equal(c.index, 17);
    assert_int_equal(gpu_device_parse(NULL, &c, err, sizeof err), GPU_OK);
    assert_false(c.use_cpu);
    assert_int_equal(c.index, 0);
    assert_int_equal(gpu_device_parse("", &c, err, sizeof err), GPU_OK);
    assert_int_equal(c.index, 0);
}

static void
test_device_parse_bad(void **state)
{
    static const char *bad[] = {
        "banana", "-1", "+1", " 1", "1 ", "1x", "0x1", "1024",
        "99999999999999999999", "CPU", "cpu0", "1.0",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct gpu_device_choice c = { .use_cpu = true, .index = 42 };
        char err[128] = "";

        assert_int_equal(gpu_device_parse(bad[i], &c, err, sizeof err),
                         GPU_ERR_INVALID);
        /* The message quotes the value so the log line is actionable. */
        assert_non_null(strstr(err, bad[i]));
        /* A refused value leaves the caller's choice alone. */
        assert_true(c.use_cpu);
        assert_int_equal(c.index, 42);
    }
}

static void
test_device_check(void **state)
{
    struct gpu_device_choice cpu = { .use_cpu = true };
    struct gpu_device_choice far = { .use_cpu = false, .index = 1000 };
    char err[256] = "";
    int n = gpu_device_count(NULL);

    assert_int_equal(gpu_device_check(&cpu, err, sizeof err), GPU_OK);
    assert_int_equal(gpu_device_check(&far, err, sizeof err),
                     GPU_ERR_NO_DEVICE);
    assert_non_null(strstr(err, "1000"));
    for (int i = 0; i < n; i++) {
        struct gpu_device_choice c = { .use_cpu = false, .index = i };
        assert_int_equal(gpu_device_check(&c, err, sizeof err), GPU_OK);
    }
    struct gpu_device_choice next = { .use_cpu = false, .index = n };
    assert_int_equal(gpu_device_check(&next, err, sizeof err),
                     GPU_ERR_NO_DEVICE);
}

static void
test_bool_parse(void **state)
{
    bool b = false;
    char err[128];

    assert_int_equal(gpu_bool_parse("true", false, &b, err, sizeof err), 0);
    assert_true(b);
    assert_int_equal(gpu_bool_parse("false", true, &b, err, sizeof err), 0);
    assert_false(b);
    assert_int_equal(gpu_bool_parse(NULL, true, &b, err, sizeof err), 0);
    assert_true(b);
    assert_int_equal(gpu_bool_parse("", false, &b, err, sizeof err), 0);
    assert_false(b);

    static const char *bad[] = { "yes", "1", "TRUE", "truex", "on" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        b = true;
        assert_int_equal(gpu_bool_parse(bad[i], false, &b, err, sizeof err),
                         GPU_ERR_INVALID);
        assert_true(b);
        assert_non_null(strstr(err, bad[i]));
    }
}

static void
test_uint_parse(void **state)
{
    unsigned int n = 7;
    char err[128];

    assert_int_equal(gpu_uint_parse("0", 5, 100, &n, err, sizeof err), 0);
    assert_int_equal(n, 0);
    assert_int_equal(gpu_uint_parse("100", 5, 100, &n, err, sizeof err), 0);
    assert_int_equal(n, 100);
    assert_int_equal(gpu_uint_parse(NULL, 5, 100, &n, err, sizeof err), 0);
    assert_int_equal(n, 5);
    assert_int_equal(gpu_uint_parse("", 6, 100, &n, err, sizeof err), 0);
    assert_int_equal(n, 6);

    static const char *bad[] = {
        "101", "-3", "+3", " 3", "3 ", "3x", "banana", "1e3",
        "99999999999999999999999",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        n = 42;
        assert_int_equal(gpu_uint_parse(bad[i], 5, 100, &n, err,
                                        sizeof err), GPU_ERR_INVALID);
        assert_int_equal(n, 42);
        assert_non_null(strstr(err, bad[i]));
    }
}

static void
test_host_alloc(void **state)
{
    /* Sizes around the header, odd sizes and a large buffer. */
    static const size_t sizes[] = { 1, 63, 64, 65, 4096, 1 << 24 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint8_t *p = gpu_host_alloc(sizes[i]);
        assert_non_null(p);
        assert_int_equal((uintptr_t) p % 64, 0);
        memset(p, 0xa5, sizes[i]);
        assert_int_equal(p[sizes[i] - 1], 0xa5);
        gpu_host_free(p);
    }
    gpu_host_free(NULL);
    assert_null(gpu_host_alloc(SIZE_MAX));
}

/* gpu_host_register(): where there is a device, a registered range is
 * found whole and nowhere else, and forgotten when unregistered or
 * retired; without one, registration says so and nothing is registered
 * (or retired). */
static void
test_host_register(void **state)
{
    enum { LEN = 1 << 20 };
    uint8_t *mem = gpu_host_alloc(2 * LEN);
    size_t n_ranges, n_bytes;
    int status;

    (void) state;
    assert_non_null(mem);
    assert_int_equal(gpu_host_register(NULL, LEN, 0), GPU_ERR_INVALID);
    assert_int_equal(gpu_host_register(mem, 0, 0), GPU_ERR_INVALID);
    /* Heap memory, as a packet pool's: the first half. */
    uint8_t *heap = malloc(LEN + 4096);
    assert_non_null(heap);
    status = gpu_host_register(heap, LEN, 0);
    if (gpu_device_count(NULL) == 0) {
        assert_int_equal(status, GPU_ERR_NO_DEVICE);
        assert_false(gpu_host_registered(heap, 1));
        gpu_host_registered_totals(&n_ranges, &n_bytes);
        assert_int_equal(n_ranges, 0);
    } else {
        assert_int_equal(status, GPU_OK);
        assert_int_equal(gpu_host_register(heap, LEN, 0), GPU_OK);
        assert_true(gpu_host_registered(heap, LEN));
        assert_true(gpu_host_registered(heap + 100, 1500));
        assert_true(gpu_host_registered(heap + LEN - 1, 1));
        assert_false(gpu_host_registered(heap + LEN - 1, 2));
        assert_false(gpu_host_registered(heap - 1, 2));
        assert_false(gpu_host_registered(heap + LEN, 1));
        assert_false(gpu_host_registered(NULL, 1));
        gpu_host_registered_totals(&n_ranges, &n_bytes);
        assert_int_equal(n_ranges, 1);
        assert_int_equal(n_bytes, LEN);
        assert_int_equal(gpu_host_unregister(heap), GPU_OK);
        assert_false(gpu_host_registered(heap + 100, 1500));
        assert_int_equal(gpu_host_unregister(heap), GPU_ERR_NOT_FOUND);
        gpu_host_registered_totals(&n_ranges, &n_bytes);
        assert_int_equal(n_ranges, 0);

        /* Retired: a free next to the range leaves it; one inside it
         * retires all of it (still registered with the device). */
        assert_int_equal(gpu_host_register(heap, LEN, 0), GPU_OK);
        assert_int_equal(gpu_host_retire(heap + LEN, 4096), 0);
        assert_int_equal(gpu_host_retire(heap - 4096, 4096), 0);
        assert_true(gpu_host_registered(heap, LEN));
        assert_int_equal(gpu_host_retire(heap + LEN / 2, 1), 1);
        assert_false(gpu_host_registered(heap, 1));
        assert_false(gpu_host_registered(heap + LEN - 1, 1));
        gpu_host_registered_totals(&n_ranges, &n_bytes);
        assert_int_equal(n_ranges, 0);
        assert_int_equal(gpu_host_retire(heap, LEN), 0);
        assert_int_equal(gpu_host_unregister(heap), GPU_OK);
        assert_int_equal(gpu_host_unregister(heap), GPU_ERR_NOT_FOUND);
    }
    assert_int_equal(gpu_host_retire(heap, LEN), 0);
    free(heap);
    gpu_host_free(mem);
}

/* gpu_gather_descs() on random batches: replaying its descriptors (as
 * gpu_gather_body() does on the device) into a buffer must give exactly
 * the batch's payloads, whichever are read in place (in a registered
 * range where there is a device) and however runs of staged ones are
 * merged; no descriptor longer than GPU_GATHER_RUN_BYTES unless all are
 * staged (pieces), none more than the packets; an empty payload needs
 * none; a payload outside registered memory is refused. */
static void
test_gather_descs(void **state)
{
    enum { MAXP = 300, LEN = 1 << 20 };
    uint64_t seed = test_seed_init("test-runtime");
    bool device = gpu_device_count(NULL) > 0;
    uint8_t *place = malloc(LEN);       /* Where payloads are in place. */
    uint8_t *staged = malloc(MAXP * 1600);
    uint8_t *want = malloc(MAXP * 1600);
    uint8_t *got = malloc(MAXP * 1600);
    struct gpu_gather_desc *descs = malloc(MAXP * sizeof *descs);
    const uint8_t **srcs = malloc(MAXP * sizeof *srcs);
    uint32_t offsets[MAXP + 1];
    uint32_t n_out;

    (void) state;
    assert_true(place && staged && want && got && descs && srcs);
    for (size_t i = 0; i < LEN; i++) {
        place[i] = i * 131 + (i >> 9);
    }
    if (device) {
        assert_int_equal(gpu_host_register(place, LEN, 0), GPU_OK);
    }
    for (int round = 0; round < 200; round++) {
        struct rng r = rng_for_case(seed, 40, round);
        size_t n = 1 + rng_below(&r, MAXP);
        int mode = rng_below(&r, 3);    /* 0 all staged, 1 mixed, 2 all
                                         * in place. */
        bool use_srcs = mode || rng_below(&r, 2);
        uint32_t base = rng_below(&r, 64);
        size_t total;

        offsets[0] = base;
        for (size_t i = 0; i < n; i++) {
            uint32_t len = rng_below(&r, 8) ? rng_below(&r, 1500) : 0;
            bool in_place = device && (mode == 2
                                       || (mode == 1 && rng_below(&r, 2)));

            offsets[i + 1] = offsets[i] + len;
            srcs[i] = NULL;
            if (in_place && len) {
                srcs[i] = place + rng_below(&r, LEN - len);
            }
        }
        total = offsets[n] - base;
        for (size_t i = 0; i < n; i++) {
            uint32_t len = offsets[i + 1] - offsets[i];
            uint8_t *at = staged + (offsets[i] - base);

            if (srcs[i]) {
                memcpy(want + (offsets[i] - base), srcs[i], len);
                memset(at, 0xee, len);      /* Not to be read. */
            } else {
                for (uint32_t k = 0; k < len; k++) {
                    at[k] = rng_next(&r);
                }
                memcpy(want + (offsets[i] - base), at, len);
            }
        }
        assert_int_equal(gpu_gather_descs(offsets, n,
                                          use_srcs ? srcs : NULL,
                                          (const char *) staged, descs,
                                          &n_out),
                         GPU_OK);
        assert_true(n_out <= n);
        memset(got, 0x5a, total);
        for (uint32_t k = 0; k < n_out; k++) {
            assert_true(descs[k].len > 0);
            assert_true(descs[k].dst + descs[k].len <= total);
            if (use_srcs) {
                assert_true(descs[k].len <= GPU_GATHER_RUN_BYTES
                            || (const uint8_t *) (uintptr_t) descs[k].src
                               < staged
                            || (const uint8_t *) (uintptr_t) descs[k].src
                               >= staged + total);
            }
            memcpy(got + descs[k].dst,
                   (const void *) (uintptr_t) descs[k].src, descs[k].len);
        }
        if (memcmp(got, want, total)) {
            fail_msg("GPU_TEST_SEED=0x%016" PRIx64 " round %d: the "
                     "descriptors of %zu payloads (mode %d) do not give "
                     "them", seed, round, n, mode);
        }

        /* Only those in place, with no staged block to read from: the
         * staged bytes are left alone. */
        assert_int_equal(gpu_gather_descs(offsets, n, srcs, NULL, descs,
                                          &n_out),
                         GPU_OK);
        for (uint32_t k = 0; k < n_out; k++) {
            const uint8_t *src = (const uint8_t *) (uintptr_t) descs[k].src;

            assert_true(src >= place && src + descs[k].len <= place + LEN);
        }
    }

    /* Outside registered memory: refused. */
    offsets[0] = 0;
    offsets[1] = 100;
    srcs[0] = want;
    assert_int_equal(gpu_gather_descs(offsets, 1, srcs, (const char *) staged,
                                      descs, &n_out),
                     GPU_ERR_INVALID);
    if (device) {
        assert_int_equal(gpu_host_unregister(place), GPU_OK);
    }
    free(place);
    free(staged);
    free(want);
    free(got);
    free(descs);
    free(srcs);
}

static void
test_streams(void **state)
{
    struct gpu_stream *s = NULL;

    assert_int_equal(gpu_stream_create(&s), GPU_OK);
    assert_non_null(s);
    assert_int_equal(gpu_stream_sync(s), GPU_OK);
    assert_int_equal(gpu_stream_query(s), GPU_OK);
    if (!gpu_device_count(NULL)) {
        assert_null(gpu_stream_native(s));
    } else {
        assert_non_null(gpu_stream_native(s));
    }
    gpu_stream_destroy(s);

    /* The per-thread stream is created once and then reused. */
    struct gpu_stream *t1 = gpu_stream_per_thread();
    assert_non_null(t1);
    assert_ptr_equal(gpu_stream_per_thread(), t1);
}

/* struct gpu_graph's bookkeeping.  Without a device nothing can be built
 * and nothing is ever in flight.  With one, a graph whose chain lacks
 * gpu_graph_done_kernel() (here: an empty one) stands for a launch that
 * failed on the device: its flag never comes, and poll and wait must say
 * so instead of waiting for ever.  The done path itself is tested by the
 * libraries that build graphs (test-ids, test-re). */
static void
test_graph(void **state)
{
    struct gpu_graph g;
    void *capture;
    int status = GPU_ERR_BUSY;
    int polls = 0;

    if (!gpu_device_count(NULL)) {
        assert_int_not_equal(gpu_graph_capture_begin(&g, &capture), GPU_OK);
        assert_null(capture);
        assert_true(g.broken);
        assert_null(g.exec);
        assert_int_equal(gpu_graph_poll(&g), GPU_OK);
        assert_int_equal(gpu_graph_wait(&g), GPU_OK);
        assert_int_not_equal(gpu_graph_launch(&g, NULL), GPU_OK);
        gpu_graph_destroy(&g);
        return;
    }
    assert_int_equal(gpu_graph_capture_begin(&g, &capture), GPU_OK);
    assert_non_null(capture);
    assert_non_null(g.flag);
    assert_int_equal(gpu_graph_capture_end(&g, capture, GPU_OK), GPU_OK);
    assert_non_null(g.exec);
    for (int round = 0; round < 2; round++) {
        void *s = gpu_stream_native(gpu_stream_per_thread());

        assert_int_equal(gpu_graph_next_seq(&g), g.seq + 1);
        assert_int_equal(gpu_graph_launch(&g, s), GPU_OK);
        assert_true(g.in_flight);
        if (!round) {
            while ((status = gpu_graph_poll(&g)) == GPU_ERR_BUSY) {
                polls++;
                assert_true(polls < 1024 * 1024);
            }
        } else {
            status = gpu_graph_wait(&g);
        }
        assert_int_equal(status, GPU_ERR_DEVICE);
        assert_false(g.in_flight);
    }
    gpu_graph_destroy(&g);
    assert_null(g.exec);
}

static void
test_status_strings(void **state)
{
    for (int st = GPU_ERR_BUSY; st <= GPU_OK; st++) {
        assert_string_not_equal(gpu_status_string(st), "unknown error");
    }
    assert_string_equal(gpu_status_string(-1000), "unknown error");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_discovery),
        cmocka_unit_test(test_device_parse_good),
        cmocka_unit_test(test_device_parse_bad),
        cmocka_unit_test(test_device_check),
        cmocka_unit_test(test_bool_parse),
        cmocka_unit_test(test_uint_parse),
        cmocka_unit_test(test_host_alloc),
        cmocka_unit_test(test_host_register),
        cmocka_unit_test(test_gather_descs),
        cmocka_unit_test(test_streams),
        cmocka_unit_test(test_graph),
        cmocka_unit_test(test_status_strings),
    };
    return test_run_group("test-runtime", tests);
}
