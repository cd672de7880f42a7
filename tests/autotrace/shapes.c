/* shapes.c - the call shapes that test autotrace's accounting of hot (counted) calls: a
 * recursive function called from a loop (fib), mutual recursion (is_even/is_odd), and a function
 * whose calls are mostly tiny but sometimes do deep work (check). Built with
 * -finstrument-functions and linked with libsonde-autotrace; main is not instrumented, so the
 * three drivers are the roots of the traced time. */
#include <stdio.h>

static volatile unsigned long g_sink;

int fib(int n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

void fib_rounds(void)
{
    for (int i = 0; i < 20; i++)
        g_sink += (unsigned long)fib(18);
}

int is_odd(int n);

int is_even(int n)
{
    return n == 0 ? 1 : is_odd(n - 1);
}

int is_odd(int n)
{
    return n == 0 ? 0 : is_even(n - 1);
}

void spin(unsigned long n)
{
    for (unsigned long i = 0; i < n; i++)
        g_sink += i;
}

void parity_rounds(void)
{
    for (int i = 0; i < 20000; i++) {
        g_sink += (unsigned long)is_even(30 + i % 7);
        if (i % 200 == 0)
            spin(20000);
    }
}

/* The deep work's own loop (not spin: parity_rounds' calls of spin must stay apart). */
void deep_leaf(unsigned long n)
{
    for (unsigned long i = 0; i < n; i++)
        g_sink += i ^ 1;
}

void deep(unsigned long n)
{
    deep_leaf(n);
    deep_leaf(n);
}

/* Mostly tiny; one call in 500 does deep work. */
int check(int i)
{
    if (i % 500 == 0)
        deep(200000);
    return i & 1;
}

void check_rounds(void)
{
    for (int i = 0; i < 100000; i++)
        g_sink += (unsigned long)check(i);
}

__attribute__((no_instrument_function)) int main(void)
{
    fib_rounds();
    parity_rounds();
    check_rounds();
    printf("%lu\n", g_sink);
    return 0;
}
