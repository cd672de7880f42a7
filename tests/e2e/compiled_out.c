/* compiled_out.c - built with -DSONDE_DISABLE: the macros leave no trace in the object file
 * (the test checks with nm that nothing sonde__* is referenced). */
#include <stdio.h>

#include <sonde/sonde.h>

static int work(sonde_profiler *p, int n)
{
    SONDE_FUNCTION(p);
    int acc = 0;
    for (int i = 0; i < n; i++) {
        SONDE_SCOPE(p, "loop");
        acc += i;
    }
    return acc;
}

int main(void)
{
    sonde_profiler *p = NULL;
    printf("%d\n", work(p, 10));
    return 0;
}
