/* test_util.c - varints, the JSON/CSV encoders, the string map, file helpers, growing arrays. */
#include "testutil.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/fileio.h"
#include "util/strmap.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static void varint_round_trip(void **state)
{
    (void)state;
    uint64_t vals[] = {0, 1, 127, 128, 300, 16383, 16384, UINT32_MAX, (uint64_t)1 << 63,
                       UINT64_MAX};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        uint8_t buf[16];
        size_t n = varint_put(buf, vals[i]);
        uint64_t back = 0;
        assert_int_equal(varint_get(buf, n, &back), n);
        assert_true(back == vals[i]);
        /* truncated input is refused, not over-read */
        if (n > 1)
            assert_int_equal(varint_get(buf, n - 1, &back), 0);
    }
    for (int64_t v = -5; v <= 5; v++)
        assert_true(zigzag_dec(zigzag_enc(v)) == v);
    assert_true(zigzag_dec(zigzag_enc(INT64_MIN)) == INT64_MIN);
    uint8_t over[11];
    memset(over, 0xff, sizeof over);
    uint64_t v;
    assert_int_equal(varint_get(over, sizeof over, &v), 0);
}

static void json_escaping(void **state)
{
    (void)state;
    sbuf b;
    sbuf_init(&b);
    sbuf_json_str(&b, "a\"b\\c\n\t\x01<script>");
    assert_string_equal(b.data, "\"a\\\"b\\\\c\\n\\t\\u0001<script>\"");
    sbuf_reset(&b);
    sbuf_json_str(&b, "caf\xc3\xa9 \xff\xfe end");
    assert_string_equal(b.data, "\"caf\xc3\xa9 \\ufffd\\ufffd end\"");
    sbuf_reset(&b);
    sbuf_json_str(&b, "\xed\xa0\x80"); /* an encoded surrogate is not valid UTF-8 */
    assert_string_equal(b.data, "\"\\ufffd\\ufffd\\ufffd\"");
    sbuf_reset(&b);
    sbuf_json_num(&b, 0.0 / 0.0);
    sbuf_putc(&b, ' ');
    sbuf_json_num(&b, 42);
    sbuf_putc(&b, ' ');
    sbuf_json_num(&b, 0.25);
    assert_string_equal(b.data, "null 42 0.25");
    sbuf_free(&b);
}

static void csv_and_numbers(void **state)
{
    (void)state;
    sbuf b;
    sbuf_init(&b);
    sbuf_csv_str(&b, "plain");
    sbuf_putc(&b, '|');
    sbuf_csv_str(&b, "a,b \"q\"");
    assert_string_equal(b.data, "plain|\"a,b \"\"q\"\"\"");
    sbuf_reset(&b);
    sbuf_us3(&b, 1234567);
    sbuf_putc(&b, ' ');
    sbuf_us3(&b, 5);
    sbuf_putc(&b, ' ');
    sbuf_u64(&b, UINT64_MAX);
    assert_string_equal(b.data, "1234.567 0.005 18446744073709551615");
    sbuf_reset(&b); /* exact decimals: ns as ms, negative, none, the most negative value */
    sbuf_decimal(&b, 1500000, 6);
    sbuf_putc(&b, ' ');
    sbuf_decimal(&b, -7, 3);
    sbuf_putc(&b, ' ');
    sbuf_decimal(&b, 42, 0);
    sbuf_putc(&b, ' ');
    sbuf_decimal(&b, INT64_MIN, 9);
    assert_string_equal(b.data, "1.500000 -0.007 42 -9223372036.854775808");
    sbuf_free(&b);
}

static void strmap_basics(void **state)
{
    (void)state;
    strmap m;
    strmap_init(&m);
    assert_int_equal(strmap_get(&m, "x"), -1);
    char key[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "k%d", i);
        assert_int_equal(strmap_put(&m, key, i), 0);
    }
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "k%d", i);
        assert_int_equal(strmap_get(&m, key), i);
    }
    strmap_put(&m, "k5", 77);
    assert_int_equal(strmap_get(&m, "k5"), 77);
    assert_int_equal((int)m.used, 1000);
    strmap_free(&m);
}

static void atomic_file_and_dirs(void **state)
{
    (void)state;
    char dir[256], path[512];
    tu_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/a/b/c", dir);
    assert_int_equal(mkdir_p(path), 0);
    assert_int_equal(mkdir_p(path), 0);
    snprintf(path, sizeof path, "%s/a/b/c/report.txt", dir);
    assert_int_equal(write_file_atomic(path, "hello", 5), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal((int)st.st_size, 5);
    /* a file where a directory should be */
    snprintf(path, sizeof path, "%s/a/b/c/report.txt/x", dir);
    assert_int_equal(mkdir_p(path), -1);
    tu_rmrf(dir);
}

static void read_whole_file(void **state)
{
    (void)state;
    char dir[256], path[512];
    tu_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/in.yaml", dir);
    assert_int_equal(write_file_atomic(path, "key: 1\n", 7), 0);
    char *buf = NULL;
    size_t n = 0;
    assert_int_equal(read_file_all(path, 7, &buf, &n), 0);
    assert_int_equal((int)n, 7);
    assert_string_equal(buf, "key: 1\n"); /* NUL-terminated for text parsers */
    free(buf);
    errno = 0;
    assert_int_equal(read_file_all(path, 6, &buf, &n), -1);
    assert_int_equal(errno, EFBIG);
    assert_null(buf);
    assert_int_equal(read_file_all(dir, 1 << 20, &buf, &n), -1);
    assert_int_equal(errno, EINVAL);
    snprintf(path, sizeof path, "%s/missing", dir);
    assert_int_equal(read_file_all(path, 1 << 20, &buf, &n), -1);
    assert_int_equal(errno, ENOENT);
    tu_rmrf(dir);
}

/* SONDE_RESERVE: room for more after the n in use, the contents kept, the capacity n + more
 * or double, the larger; an overflowing request refused with the array as it was. */
static void reserve_room(void **state)
{
    (void)state;
    int *v = NULL;
    size_t n = 0, cap = 0;
    assert_int_equal(SONDE_RESERVE(v, n, 0, cap), 0); /* none wanted: nothing allocated */
    assert_null(v);
    assert_int_equal(SONDE_RESERVE(v, n, 5, cap), 0);
    assert_int_equal(cap, 5);
    for (; n < 5; n++)
        v[n] = (int)n * 7;
    int *before = v;
    assert_int_equal(SONDE_RESERVE(v, n, 0, cap), 0); /* full, none more wanted */
    assert_ptr_equal(v, before);
    assert_int_equal(SONDE_RESERVE(v, n, 1, cap), 0); /* one more: doubled */
    assert_int_equal(cap, 10);
    assert_int_equal(SONDE_RESERVE(v, n, 20, cap), 0); /* more than double: exactly that */
    assert_int_equal(cap, 25);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(v[i], (int)i * 7);
    before = v;
    assert_int_equal(SONDE_RESERVE(v, n, SIZE_MAX - 2, cap), -1); /* n + more overflows */
    assert_int_equal(SONDE_RESERVE(v, n, SIZE_MAX / 2, cap), -1); /* the bytes overflow */
    assert_ptr_equal(v, before);
    assert_int_equal(cap, 25);
    sonde__free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reserve_room),
        cmocka_unit_test(varint_round_trip), cmocka_unit_test(json_escaping),
        cmocka_unit_test(csv_and_numbers), cmocka_unit_test(strmap_basics),
        cmocka_unit_test(atomic_file_and_dirs), cmocka_unit_test(read_whole_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
