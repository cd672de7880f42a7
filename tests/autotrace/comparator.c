/* comparator.c - a program whose comparator is called very often (qsort's callback, as in
 * llama2.c's sampling): under libsonde-autotrace at its defaults it must finish with its reports
 * in bounded memory, the comparator counted and summed once it is found hot.
 *
 *   comparator N     sorts 1,000-element arrays until the comparator has run N times; prints
 *                    "comparisons N" */
#include <stdio.h>
#include <stdlib.h>

static unsigned long long g_calls;

static int by_value(const void *a, const void *b)
{
    g_calls++;
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static void sort_round(int *v, int n, unsigned *seed)
{
    for (int i = 0; i < n; i++) {
        *seed = *seed * 1103515245u + 12345u;
        v[i] = (int)(*seed >> 8);
    }
    qsort(v, (size_t)n, sizeof *v, by_value);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: comparator N\n");
        return 2;
    }
    unsigned long long want = strtoull(argv[1], NULL, 10);
    static int v[1000];
    unsigned seed = 1;
    while (g_calls < want)
        sort_round(v, 1000, &seed);
    printf("comparisons %llu\n", g_calls);
    return 0;
}
