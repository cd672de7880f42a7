/* test_threads.c - many threads recording at once (run under TSan by make test): 8 threads x
 * 100,000 nested sections, every one of which must be in the report; threads that come and go
 * reuse buffers and lose nothing. */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

enum { THREADS = 8, PER_THREAD = 100000 };

static void *record(void *arg)
{
    sonde_profiler *p = arg;
    for (int i = 0; i < PER_THREAD / 2; i++) {
        SONDE_SCOPE(p, "outer");
        {
            SONDE_SCOPE(p, "inner");
        }
        if (i % 1000 == 0)
            sonde_counter(p, "progress", i);
    }
    return NULL;
}

static void eight_threads(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "threads");
    sonde_profiler *p = sonde_create(&c);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, record, p), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    sm_model m;
    assert_int_equal(tu_finish(p, &m), 0);
    assert_int_equal((int)m.n_spans, THREADS * PER_THREAD);
    assert_int_equal((int)tu_stat(&m, "outer")->count, THREADS * PER_THREAD / 2);
    assert_int_equal((int)tu_stat(&m, "inner")->count, THREADS * PER_THREAD / 2);
    assert_int_equal((int)tu_stat(&m, "inner")->threads, THREADS);
    assert_int_equal((int)m.dropped_events, 0);
    int with_spans = 0;
    for (size_t i = 0; i < m.n_threads; i++)
        if (m.threads[i].spans) {
            with_spans++;
            assert_int_equal((int)m.threads[i].spans, PER_THREAD);
        }
    assert_int_equal(with_spans, THREADS);
    /* every inner is inside an outer of the same thread */
    for (size_t i = 0; i < m.n_spans; i++)
        if (m.spans[i].depth == 1)
            assert_int_equal((int)m.spans[m.spans[i].parent].thread, (int)m.spans[i].thread);
    sm_free(&m);
    tu_rmrf(dir);
}

static void *short_lived(void *arg)
{
    sonde_profiler *p = arg;
    static _Atomic int serial;
    char name[32];
    snprintf(name, sizeof name, "churner-%d", atomic_fetch_add(&serial, 1));
    sonde_thread_name(p, name);
    for (int i = 0; i < 10; i++) {
        SONDE_SCOPE(p, "churn");
    }
    return NULL;
}

static void thread_churn(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "churn");
    c.flush_interval_s = 60; /* threads come and go between two writer passes */
    sonde_profiler *p = sonde_create(&c);
    enum { WAVES = 50, WIDTH = 4 };
    for (int w = 0; w < WAVES; w++) {
        pthread_t th[WIDTH];
        for (int i = 0; i < WIDTH; i++)
            pthread_create(&th[i], NULL, short_lived, p);
        for (int i = 0; i < WIDTH; i++)
            pthread_join(th[i], NULL);
    }
    sm_model m;
    assert_int_equal(tu_finish(p, &m), 0);
    assert_int_equal((int)tu_stat(&m, "churn")->count, WAVES * WIDTH * 10);
    assert_int_equal((int)m.dropped_events, 0);
    /* a buffer is reused only once its thread's name is in the file: every thread that
     * recorded keeps the name it gave itself (the e2e pipeline once showed "thread 2") */
    int named = 0;
    for (size_t i = 0; i < m.n_threads; i++)
        if (m.threads[i].spans) {
            assert_non_null(m.threads[i].name);
            assert_memory_equal(m.threads[i].name, "churner-", 8);
            named++;
        }
    assert_int_equal(named, WAVES * WIDTH);
    sm_free(&m);
    tu_rmrf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(eight_threads),
                                       cmocka_unit_test(thread_churn)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
