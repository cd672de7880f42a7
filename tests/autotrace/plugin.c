/* plugin.c - a shared library built with -finstrument-functions that traced.c loads with dlopen
 * after tracing began: its functions, a static one included, must still get their names. */
static int plugin_static(int x)
{
    return x * 7;
}

int plugin_work(int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s += plugin_static(i);
    return s;
}
