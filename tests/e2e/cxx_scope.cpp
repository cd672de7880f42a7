// cxx_scope.cpp - the public header compiled as C++: SONDE_SCOPE is an RAII guard there.
#include <cstdio>
#include <sonde/sonde.h>

static void inner(sonde_profiler *p)
{
    SONDE_FUNCTION(p);
}

int main(int argc, char **argv)
{
    sonde_config c = sonde_config_default();
    c.output_dir = argc > 1 ? argv[1] : "./sonde-out";
    c.name = "cxx";
    c.formats = SONDE_FORMAT_JSON;
    sonde_profiler *p = sonde_create(&c);
    for (int i = 0; i < 5; i++) {
        SONDE_SCOPE(p, "cxx outer");
        inner(p);
    }
    return sonde_destroy(p) == 0 ? 0 : 1;
}
